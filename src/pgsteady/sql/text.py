"""SQL text without a parser: where statements end, where literals are, and masking secrets.

One linear scanner over PostgreSQL's lexical rules (``--`` and nested ``/* */`` comments,
``'...'``, ``E'...'``, ``U&'...'``, ``B''``/``X''``/``N''``, ``"identifiers"``, ``$tag$...$tag$``,
parentheses, and ``BEGIN ATOMIC ... END`` bodies of SQL functions) serves two needs:

- :func:`split` cuts a migration file into statements in one pass, so loading a file costs time
  linear in its size and each statement is parsed on its own (memory bounded by the largest
  statement, not the file);
- :func:`scrub` hides passwords in other sessions' query text, whatever literal form they use,
  before anything is cut or printed.

It imports neither psycopg nor pglast: the linter imports it and must start fast.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator

from pgsteady._record import Record

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Final

# What can change the scanner's state; everything between two of these is plain text.
_SPECIAL = re.compile(r"--|/\*|['\"$;()]")
_SPECIAL_WORDS = re.compile(r"--|/\*|['\"$;()]|[A-Za-z_][A-Za-z0-9_$]*")
_BLOCK = re.compile(r"/\*|\*/")
# Identifier characters as PostgreSQL's lexer has them: letters, _, any non-ASCII character
# (and digits, $ after the first). Written as negated ASCII classes: a class spanning
# \u0080-\uffff costs ~3.5 ms to compile, paid by every command's start-up.
_DOLLAR_TAG = re.compile(r"\$(?:[^\x00-@\[-\^`{-\x7f][^\x00-/:-@\[-\^`{-\x7f]*)?\$")
_IDENT_CHAR = re.compile(r"[^\x00-#%-/:-@\[-\^`{-\x7f]")
# Statements whose body may hold semicolons outside any quotes (SQL-standard bodies, PG 14+).
_ROUTINE_HEAD = re.compile(
    r"(?:\s|--[^\n\r]*[\n\r]|/\*.*?\*/)*create\s+(?:or\s+replace\s+)?(?:function|procedure)\b",
    re.IGNORECASE | re.DOTALL)
MASK = "'***'"
# Literal bodies as unrolled loops (no per-character alternation): '' is a quote inside;
# in E'' strings a backslash escapes the next character too.
_PLAIN = {q: re.compile(f"{q}[^{q}]*(?:{q}{q}[^{q}]*)*{q}") for q in "'\""}
_ESCAPED = {q: re.compile(f"{q}[^{q}\\\\]*(?:(?:\\\\.|{q}{q})[^{q}\\\\]*)*{q}", re.DOTALL)
            for q in "'\""}


class Chunk(Record):
    """One statement's text (without its ``;``), where it starts in the file (1-based)."""

    __slots__ = ("col", "line", "offset", "text")

    def __init__(self, text: str, offset: int, line: int, col: int) -> None:
        self.text: Final = text
        self.offset: Final = offset
        self.line: Final = line
        self.col: Final = col


def _literal_end(text: str, pos: int, *, backslash: bool) -> int:
    """End (exclusive) of the quoted literal whose opening quote is at ``pos``; an
    unterminated one runs to the end of the text (it is still a literal, and still masked)."""
    body = (_ESCAPED if backslash else _PLAIN)[text[pos]]
    match = body.match(text, pos)
    return len(text) if match is None else match.end()


def _block_end(text: str, pos: int) -> int:
    """End of the (nested) block comment opening at ``pos``."""
    depth = 0
    for match in _BLOCK.finditer(text, pos):
        depth += 1 if match.group() == "/*" else -1
        if depth == 0:
            return match.end()
    return len(text)


def _is_escape_string(text: str, quote: int) -> bool:
    """``E'...'``: the quote follows an E that is not the end of a longer word."""
    return (quote > 0 and text[quote - 1] in "eE"
            and (quote < 2 or not _IDENT_CHAR.match(text[quote - 2])))


def _literal_start(text: str, quote: int) -> int:
    """Where a literal's prefix (E, U&, B, X, N) starts, for masking it whole."""
    if quote >= 2 and text[quote - 2:quote].upper() == "U&" and \
            (quote < 3 or not _IDENT_CHAR.match(text[quote - 3])):
        return quote - 2
    if quote >= 1 and text[quote - 1] in "eEbBxXnN" and \
            (quote < 2 or not _IDENT_CHAR.match(text[quote - 2])):
        return quote - 1
    return quote


def _dollar_end(text: str, pos: int) -> int | None:
    """End of a dollar-quoted literal opening at ``pos``, or None if ``$`` starts none there
    (``$1``, or ``$`` inside a word such as ``a$b``)."""
    if pos > 0 and _IDENT_CHAR.match(text[pos - 1]):
        return None
    match = _DOLLAR_TAG.match(text, pos)
    if match is None:
        return None
    close = text.find(match.group(), match.end())
    return len(text) if close < 0 else close + len(match.group())


def _skip(text: str, match: re.Match[str]) -> tuple[int, bool] | None:
    """(end, is_literal) of the comment, literal or quoted identifier ``match`` opens."""
    lexeme = match.group()
    start = match.start()
    if lexeme == "--":
        return comment_end(text, start), False
    if lexeme == "/*":
        return _block_end(text, start), False
    if lexeme == "'":
        return _literal_end(text, start, backslash=_is_escape_string(text, start)), True
    if lexeme == '"':
        return _literal_end(text, start, backslash=False), False
    if lexeme == "$":
        end = _dollar_end(text, start)
        return None if end is None else (end, True)
    return None


def split(text: str) -> Iterator[Chunk]:
    """The statements of ``text`` in order, each with its position; linear in ``len(text)``.

    A statement ends at a ``;`` outside quotes, comments, parentheses and SQL-standard routine
    bodies (``BEGIN ATOMIC ... END``), as psql splits a script. Chunks holding only blanks and
    comments are yielded too (a parser finds no statement in them).
    """
    start = 0
    line = 1
    line_start = 0  # offset of the first character of ``line``
    counted = 0  # newlines are counted up to here
    pos = 0
    depth = 0
    block_depth = 0
    routine = bool(_ROUTINE_HEAD.match(text, 0))
    n = len(text)
    while pos < n:
        match = (_SPECIAL_WORDS if routine else _SPECIAL).search(text, pos)
        if match is None:
            break
        lexeme = match.group()
        skipped = _skip(text, match)
        if skipped is not None:
            pos = skipped[0]
            continue
        pos = match.end()
        if lexeme == "(":
            depth += 1
        elif lexeme == ")":
            depth = max(0, depth - 1)
        elif lexeme == ";":
            if depth or block_depth:
                continue
            chunk_line, chunk_col, line, line_start, counted = _advance(
                text, start, line, line_start, counted)
            yield Chunk(text[start:match.start()], start, chunk_line, chunk_col)
            start = pos
            routine = bool(_ROUTINE_HEAD.match(text, start))
        elif lexeme not in ("$",):
            word = lexeme.lower()
            if word in ("begin", "case"):
                block_depth += 1
            elif word == "end" and block_depth:
                block_depth -= 1
    if start < n:
        chunk_line, chunk_col, *_ = _advance(text, start, line, line_start, counted)
        yield Chunk(text[start:], start, chunk_line, chunk_col)


def _advance(text: str, offset: int, line: int, line_start: int, counted: int) \
        -> tuple[int, int, int, int, int]:
    """Line and column of ``offset``, counting only the newlines not counted yet."""
    newlines = text.count("\n", counted, offset)
    if newlines:
        line += newlines
        line_start = text.rfind("\n", counted, offset) + 1
    return line, offset - line_start + 1, line, line_start, offset


#: What PostgreSQL's scanner takes for white space; str.isspace() also says yes to \x1c-\x1f,
#: \x85, a no-break space and more, which the server rejects.
BLANKS = frozenset(" \t\n\r\f\v")


def comment_end(text: str, pos: int) -> int:
    """Where the ``--`` comment at ``pos`` ends, past its line end: PostgreSQL's scanner ends
    it at a newline or a carriage return (a lone ``\\r`` is a line end to it too)."""
    newline = text.find("\n", pos)
    stop = len(text) if newline < 0 else newline
    carriage = text.find("\r", pos, stop)
    end = carriage if carriage >= 0 else newline
    return len(text) if end < 0 else end + 1


def skip_blanks(text: str, pos: int = 0) -> int:
    """The offset of the first character at or after ``pos`` that is not blank or comment."""
    n = len(text)
    while pos < n:
        if text[pos] in BLANKS:
            pos += 1
        elif text.startswith("--", pos):
            pos = comment_end(text, pos)
        elif text.startswith("/*", pos):
            pos = _block_end(text, pos)
        else:
            break
    return pos


_TEMPLATE = re.compile(r"\{\{[^{}\n]*\}\}|\$\{[^{}\n]*\}")
_TEMPLATE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def fill_placeholders(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` with each template placeholder outside quoted literals (``{{ .Schema }}`` of
    Go templates, Jinja and Mustache; ``${schema}`` of Flyway and Liquibase) replaced by a
    name of the same length (``schema___...``), and the names used, one per placeholder.

    Such folders are SQL only after their tool fills the placeholders in, usually with a
    schema or table name; read as a name, the statement parses and every rule still applies,
    and positions are unchanged. The padding keeps the name clear of keywords."""
    if "{{" not in text and "${" not in text:
        return text, ()
    # Quoted literals are values; dollar-quoted bodies are code (a DO block's PL/pgSQL).
    spans = [(start, end) for start, end in literals(text) if text[start] != "$"]
    starts = [start for start, _ in spans]
    out: list[str] = []
    names: list[str] = []
    last = 0
    for match in _TEMPLATE.finditer(text):
        at = bisect_right(starts, match.start()) - 1
        if at >= 0 and match.start() < spans[at][1]:
            continue  # inside a literal: '{{1,2}}' is an array, '${x}' plain text
        words = _TEMPLATE_WORD.findall(match.group()[2:-1])
        width = match.end() - match.start()
        name = (words[-1].lower() if words else "placeholder")[:width - 3]
        names.append(name.ljust(width, "_"))
        out += (text[last:match.start()], names[-1])
        last = match.end()
    return "".join(out) + text[last:], tuple(names)


def placeholder_shown(name: str) -> str:
    """How a filled-in placeholder name reads in a message: ``{{schema}}``."""
    return "{{" + name.rstrip("_") + "}}"


def literals(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every string literal in ``text``, prefix included."""
    pos = 0
    while True:
        match = _SPECIAL.search(text, pos)
        if match is None:
            return
        skipped = _skip(text, match)
        if skipped is None:
            pos = match.end()
            continue
        end, is_literal = skipped
        if is_literal:
            yield _literal_start(text, match.start()), end
        pos = end


_SECRET_WORDS = frozenset({"password"})
# Compiled on first use, by re's cache (a lint run never scrubs).
_DSN_HIDDEN_VALUE = r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)"
_URL_USERINFO = r"(postgres(?:ql)?://[^:/@\s]*:)([^@\s]*)(@)"


def mask_secret_literals(text: str) -> str:
    """Replace each literal that follows the word PASSWORD (any literal form, any case, with
    comments or string continuations between) by ``'***'``."""
    out: list[str] = []
    pos = 0
    last = 0
    after_secret = False
    while True:
        match = _SPECIAL_WORDS.search(text, pos)
        if match is None:
            break
        lexeme = match.group()
        skipped = _skip(text, match)
        if skipped is None:
            pos = match.end()
            if lexeme[0].isalpha() or lexeme[0] == "_":
                # a word: U&, E, B, X, N prefixes belong to the literal after them
                after_secret = lexeme.lower() in _SECRET_WORDS or (
                    after_secret and lexeme.lower() in ("e", "u", "b", "x", "n")
                    and pos < len(text) and text[pos] in "'&")
            else:  # ; ( ) or a lone $: the clause has moved on
                after_secret = False
            continue
        end, is_literal = skipped
        if is_literal and after_secret:
            begin = _literal_start(text, match.start())
            out.append(text[last:begin])
            out.append(MASK)
            last = end  # after_secret stays: 'a' 'b' continues the same literal
        elif not is_literal and lexeme in ("'", '"', "$"):
            after_secret = False
        pos = end
    out.append(text[last:])
    return "".join(out)


def scrub(text: str) -> str:
    """Hide passwords anywhere in free text: SQL literals after PASSWORD, ``password=...`` in
    a DSN, the password of a ``postgresql://user:password@`` URL. Call it before cutting."""
    text = mask_secret_literals(text)
    text = re.sub(_DSN_HIDDEN_VALUE, r"\1***", text, flags=re.IGNORECASE)
    return re.sub(_URL_USERINFO, r"\1***\3", text)


def shorten(text: str, limit: int) -> str:
    """At most ``limit`` characters, ending with ``...`` when cut; scrub before calling."""
    if limit <= 0 or len(text) <= limit:
        return text
    return text[:max(0, limit - 3)] + "..."
