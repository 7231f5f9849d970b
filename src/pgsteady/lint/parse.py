"""A migration file as a stream of parsed statements, robust to what real folders contain.

The file is split with pglast's scanner, then each statement is parsed on its own: memory
stays flat on a 50,000-row data file (one statement's tree at a time), a statement nested
deeper than Python's recursion limit is decoded on a thread with a big stack (or, if even
the C parser refuses it, reported as ``unparsed-statement`` while the rest of the file is
still linted), and statements no rule or model looks at (``wanted`` says which) are parsed
for syntax but never decoded. A short, plain file (ASCII, every statement ended by its own
``;``, no ``DO`` block) is parsed in one call instead, when it parses. psql meta-commands
(``\\set``, ``\\connect``) are blanked out and reported as notes. ``DO`` blocks are parsed
as PL/pgSQL and the SQL statements inside them come out as statements of their own, their
positions mapped back to the file.

Positions: every offset here is a byte offset into the file's UTF-8 text, as the engine
reports them; a statement's node locations count from its ``base``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence

from pgsteady._record import Record
from pgsteady.lint.deep import deep_call
from pgsteady.lint.hints import missing_semicolon_hint, odd_blank_hint
from pgsteady.sql import pglast_loader
from pgsteady.sql.text import BLANKS, skip_blanks

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any, Final

    from pglast import parser as pg

    Node = dict[str, Any]
else:
    pg = pglast_loader.parser()  # the C parser without pglast's AST classes (start-up)
    Node = dict

_META = re.compile(r"\\[A-Za-z!?.]")
_STACK_DEPTH = "stack depth limit exceeded"
_BISON_DEPTH = "memory exhausted"  # the grammar's own nesting limit (thousands of CASEs)
_THREAD_FROM = 512  # statements from which a file is parsed ahead on a helper thread
_CHUNK = 256
_FIRST_CHUNK = 32  # the first hand-over is small: the linting thread starts sooner
_CHUNKS_AHEAD = 4
_REGION = 64 * 1024  # characters a long file is split at a time
_FIRST_REGION = 8 * 1024  # the first region is small, for the same reason
_CUTS_TRIED = 4  # region ends tried before the rest of the file is split in one go
_REGIONS_FROM = 3 * _REGION  # the file length from which it is split by region, on the thread
_WHOLE_UP_TO = 16 * 1024  # characters: a short plain file is parsed in one call (_whole)
#: The decoder's C scanner (an instance attribute typeshed does not declare).
_SCAN: Callable[[str, int], tuple[Any, int]] = vars(json.JSONDecoder())["scan_once"]


class Statement(Record):
    """One statement: where it is, its tree (None if not decoded) and why, if unparsed.

    ``base`` is the byte offset the tree's ``location`` fields count from; ``embedded`` marks
    a statement from inside a ``DO`` block.
    """

    __slots__ = ("base", "embedded", "end", "kind", "node", "start", "unparsed")
    __hash__ = None  # type: ignore[assignment]  # changes after it is made

    def __init__(self, start: int, end: int, kind: str, node: Node | None,  # noqa: PLR0917
                 base: int, embedded: bool = False, unparsed: str | None = None) -> None:
        self.start = start
        self.end = end
        self.kind = kind
        self.node = node
        self.base = base
        self.embedded = embedded
        self.unparsed = unparsed


class Note(Record):
    """Something skipped on purpose, at a byte offset (a psql meta-command)."""

    __slots__ = ("offset", "text")

    def __init__(self, offset: int, text: str) -> None:
        self.offset: Final = offset
        self.text: Final = text


class ParseFailure(Exception):
    """The file does not parse: a character offset into the text, and a one-line message."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(message)
        self.offset = offset
        self.message = message


def blank_meta_commands(text: str) -> tuple[str, list[Note]]:
    """psql meta-commands (a backslash to the end of its line, as psql reads them) replaced by
    spaces of the same byte length, and notes on them.

    A backslash counts only where the scanner sees it as a token of its own, not inside a
    string, a quoted name or a dollar-quoted body.
    """
    if "\\" not in text or not _META.search(text):
        return text, []
    starts = {m.start() for m in _META.finditer(text)}
    try:
        tokens = pg.scan(text)
    except pg.ParseError:
        return text, []
    lines = []
    for token in tokens:
        if token.name == "ASCII_92" and token.start in starts:
            lines.append(token.start)
    if not lines:
        return text, []
    notes: list[Note] = []
    pieces: list[str] = []
    done = 0
    for start in lines:
        if start < done:  # a second backslash on a line already blanked
            continue
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        command = text[start:line_end].strip()
        notes.append(Note(_byte_offset(text, start), command))
        pieces.append(text[done:start])
        blank = " " * len(text[start:line_end].encode("utf-8"))
        # \g, \gset, \gx, \gexec send the query buffer: for the parser, the statement ends.
        pieces.append(";" + blank[1:] if command[1:2] == "g" else blank)
        done = line_end
    pieces.append(text[done:])
    # A non-ASCII character on a blanked line becomes several spaces: character offsets after
    # it shift, byte offsets (all that is reported) do not.
    return "".join(pieces), notes


def tokens(text: str) -> list[Any]:
    """The scanner's tokens of ``text`` (``start``, ``end`` in characters, ``name``); none
    if it cannot scan it."""
    try:
        return list(pg.scan(text))
    except pg.ParseError:
        return []


def _byte_offset(text: str, char_offset: int) -> int:
    return char_offset if text.isascii() else len(text[:char_offset].encode("utf-8"))


def statements(text: str, wanted: Callable[[str], bool]) -> Iterator[Statement]:
    """The statements of ``text`` in order; raises :class:`ParseFailure` on a syntax error.

    ``wanted(kind)`` says whether a statement's tree is needed; others are only checked for
    syntax. The file's statements are yielded one at a time, so callers that do not keep the
    trees keep memory flat.
    """
    if len(text) <= _WHOLE_UP_TO and text.isascii():
        whole = _whole(text, wanted)
        if whole is not None:
            yield from whole
            return
    done = 0  # statements yielded: a re-split must not repeat them
    try:
        if len(text) >= _REGIONS_FROM:
            found: Iterator[Statement] = _from_batches(text, _batches_by_region(text), wanted,
                                                       long=True)
        else:
            pieces = _pieces(text)
            found = _from_batches(text, _chunked(pieces), wanted,
                                  long=len(pieces) >= _THREAD_FROM)
        for statement in found:
            done = statement.end if not statement.embedded else done
            yield statement
    except ParseFailure as failure:
        # The scanner splits at every top-level ';', also inside CREATE RULE's action list
        # or a BEGIN ATOMIC body. Ask the parser whether the file really is invalid.
        try:
            again = pg.split(text, only_slices=True)
        except pg.ParseError as exc:
            raise _first_failure(text, failure, exc) from None
        rest = [p for p in again if _byte_offset(text, p.start) >= done]
        yield from _from_batches(text, _chunked(rest), wanted, long=len(rest) >= _THREAD_FROM)


def _whole(text: str, wanted: Callable[[str], bool]) -> list[Statement] | None:
    """A short ASCII file's statements from one parse of the whole text: no scanner pass and
    one call into the parser instead of one per statement (a tenth of a cold lint of a
    typical folder). Node locations then count from the file's start (``base`` 0).

    Only when the file is plain: it parses, every statement ends with its own ``;`` (so each
    ends where the scanner's split would end it), and it holds no ``DO`` block and no
    ``;`` inside a statement (a rule's actions, a ``BEGIN ATOMIC`` body); None otherwise,
    and the statement-by-statement path decides, with its errors and notes.
    """
    try:
        raw = pg.parse_sql_json(text)
    except pg.ParseError:
        return None
    if '"DoStmt"' in raw or '"RuleStmt"' in raw or '"sql_body"' in raw:
        return None  # DO blocks; a rule's actions and BEGIN ATOMIC bodies hold ';'s
    try:
        tree = _decode(raw)
    except RecursionError:
        return None
    found: list[Statement] = []
    for item in tree.get("stmts", ()):
        (kind, node), = item.get("stmt", {"": {}}).items()
        begin = item.get("stmt_location", 0)
        end = begin + item.get("stmt_len", 0)
        # Ended by a ';' right after its last word; the last statement unended, or a blank or
        # a comment before the ';', is left to the scanner's split.
        if text[end:end + 1] != ";" or text[end - 1:end] in BLANKS \
                or text.startswith("*/", end - 2):
            return None
        found.append(Statement(_first_word(text, begin, begin), end + 1, kind,
                               node if wanted(kind) else None, 0))
    return found


def _error_of(exc: pg.ParseError) -> tuple[str, int | None]:
    """pglast's ParseError as (message, character offset of the error if it gave one)."""
    message = str(exc.args[0]) if exc.args else "syntax error"
    cursor = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], int) else None
    return message, cursor


def _too_deep(message: str) -> bool:
    """The parser ran out of stack (or the grammar out of nesting), not a syntax error."""
    return _STACK_DEPTH in message or message.startswith(_BISON_DEPTH)


def _failure_at(text: str, offset: int, message: str) -> ParseFailure:
    """The file's ParseFailure at ``offset``, with a hint where one is likely."""
    return ParseFailure(offset, message + missing_semicolon_hint(text, offset)
                        + odd_blank_hint(text, offset))


def _first_failure(text: str, failure: ParseFailure, exc: pg.ParseError) -> ParseFailure:
    """The file's real first error: the parser's, when it read past where a piece failed (that
    piece was cut short by the scanner, as a BEGIN ATOMIC body is), else the piece's."""
    message, cursor = _error_of(exc)
    if cursor is None or cursor <= failure.offset or _too_deep(message):
        return failure
    return _failure_at(text, cursor, message)


def _scanner_slices(text: str, start: int = 0) -> list[slice]:
    """pglast's scanner split of ``text[start:]``, as slices of ``text``; ParseFailure on a
    lexical error (an unterminated string or comment)."""
    try:
        found = pg.split(text[start:] if start else text, with_parser=False, only_slices=True)
    except pg.ParseError as exc:
        message, cursor = _error_of(exc)
        raise ParseFailure(start + (cursor or 0), message) from None
    return [slice(start + p.start, start + p.stop) for p in found] if start else list(found)


def _with_gaps(text: str, found: Sequence[slice], done: int, stop: int,
               ) -> tuple[list[slice], int]:
    """Scanner slices as pieces, each with its ';', and any text between them (from ``done``,
    up to ``stop`` after the last) that is more than blanks, ';' and comments: the scanner
    drops a statement with no keyword in it, such as a misspelled one, and it must reach
    the parser to be reported. Returns the pieces and where the last one ends."""
    out: list[slice] = []
    for piece in found:
        if _has_content(text, done, piece.start):
            out.append(slice(done, piece.start))
        end = piece.stop + 1 if text[piece.stop:piece.stop + 1] == ";" else piece.stop
        out.append(slice(piece.start, end))
        done = end
    if _has_content(text, done, stop):
        out.append(slice(done, stop))
        done = stop
    return out, done


def _pieces(text: str) -> list[slice]:
    """The file's pieces (see :func:`_with_gaps`), from one scanner split."""
    return _with_gaps(text, _scanner_slices(text), 0, len(text))[0]


def _batches_by_region(text: str) -> Iterator[list[slice]]:
    """The same pieces as :func:`_pieces`, a region of the text at a time, so a long file's
    split runs on the parsing thread while the first statements are already linted.

    A region ends just after a ``;`` that ends a line. Where that ``;`` is not a statement's
    end (inside a string, a comment, a dollar-quoted body or a parenthesised rule action),
    the scanner tells: it either fails on the unterminated text, and the next such ``;`` is
    tried (a few, then the rest of the file is split in one go), or returns a last statement
    that no ``;`` of its own ends, which then starts the next region instead. Each region
    starts where the whole file's split would start a statement, so the pieces are the same.
    """
    start = done = 0
    while start < len(text):
        size = _REGION if start else _FIRST_REGION
        cut = text.find(";\n", start + size) if len(text) - start > 2 * _REGION else -1
        found: list[slice] = []
        for _ in range(_CUTS_TRIED):  # a cut inside a string or a body: try the next ';'
            if cut < 0:
                break
            cut += 2
            try:
                found = _scanner_slices(text[:cut], start)
                break
            except ParseFailure:
                cut = text.find(";\n", cut)
        last = found[-1] if found else None
        if last is not None and text[last.stop:cut].strip() != ";":
            found.pop()  # not ended by the region's last ';': it starts the next region
            cut = last.start
        if not found:  # the rest in one go
            pieces, done = _with_gaps(text, _scanner_slices(text, start), done, len(text))
            yield pieces
            return
        pieces, done = _with_gaps(text, found, done, cut)
        yield pieces
        start = cut


def _chunked(pieces: Sequence[slice], first: int = _CHUNK) -> Iterator[Sequence[slice]]:
    """``pieces`` in chunks of :data:`_CHUNK`, the first of ``first``."""
    yield pieces[:first]
    for start in range(first, len(pieces), _CHUNK):
        yield pieces[start:start + _CHUNK]


def _has_content(text: str, start: int, stop: int) -> bool:
    """True if ``text[start:stop]`` holds more than blanks, semicolons and comments."""
    if not text[start:stop].strip(" \t\r\n\f\v;"):
        return False
    pos = skip_blanks(text, start)
    while pos < stop and text[pos] == ";":
        pos = skip_blanks(text, pos + 1)
    return pos < stop


Parsed = list[tuple[slice, "str | pg.ParseError | UnicodeEncodeError"]]


def _parsed(text: str, pieces: Sequence[slice]) -> Parsed:
    parse_json = pg.parse_sql_json
    out: Parsed = []
    for piece in pieces:
        try:
            out.append((piece, parse_json(text[piece])))
        except (pg.ParseError, UnicodeEncodeError) as exc:
            out.append((piece, exc))
    return out


def _raw_pieces(text: str, batches: Iterator[Sequence[slice]], *, ahead: bool,
                ) -> Iterator[tuple[slice, str | pg.ParseError | UnicodeEncodeError]]:
    """Each piece with pglast's JSON for it (or the parser's exception).

    A long file (``ahead``) is split and parsed ahead on a helper thread, a chunk at a time,
    while this thread decodes and lints: the C scanner and parser release the GIL, so on two
    cores the two overlap. The queue is bounded, and the helper stops (and is joined)
    however the caller stops reading.
    """
    if not ahead:
        for batch in batches:
            yield from _parsed(text, batch)
        return
    import queue  # noqa: PLC0415 -- long files only

    chunks: queue.Queue[Parsed | None] = queue.Queue(maxsize=_CHUNKS_AHEAD)
    stop = threading.Event()
    failed: list[BaseException] = []

    def hand_over(item: Parsed | None) -> bool:
        while not stop.is_set():
            try:
                chunks.put(item, timeout=0.05)
            except queue.Full:
                continue
            return True
        return False

    def produce() -> None:
        try:
            first = _FIRST_CHUNK
            for batch in batches:
                for chunk in _chunked(batch, first):
                    if not hand_over(_parsed(text, chunk)):
                        return
                first = _CHUNK
        except BaseException as exc:  # handed to the reading thread, raised there
            failed.append(exc)
        finally:
            hand_over(None)

    helper = threading.Thread(target=produce, name="pgsteady-lint-parse", daemon=True)
    helper.start()
    try:
        while (parsed := chunks.get()) is not None:
            yield from parsed
        if failed:
            raise failed[0]
    finally:
        stop.set()
        helper.join()


def _from_batches(text: str, batches: Iterator[Sequence[slice]], wanted: Callable[[str], bool],
                  *, long: bool) -> Iterator[Statement]:
    """Parse each piece; the hot loop of the linter, so it is kept flat."""
    ascii_text = text.isascii()
    data_offset = 0  # byte offset of char_offset, advanced incrementally for non-ASCII text
    char_offset = 0
    decode = _fast_decode() if long else _decode
    for piece, raw in _raw_pieces(text, batches, ahead=long):
        char_start = piece.start
        if ascii_text:
            base = char_start
            end = piece.stop
        else:
            data_offset += len(text[char_offset:char_start].encode("utf-8"))
            char_offset = char_start
            base = data_offset
            end = base + len(text[piece].encode("utf-8"))
        if not isinstance(raw, str):  # the parser's error, or text that is not Unicode
            if isinstance(raw, UnicodeEncodeError):
                raise ParseFailure(char_start + raw.start,
                                   f"text is not valid Unicode ({raw.reason})") from None
            yield _unparsable(text, char_start, text[piece], base, end, raw)
            continue
        # The statement's type is the first key after "stmt": read it without decoding.
        at = raw.find('"stmt":{"', 0, 200) + 9
        kind = raw[at:raw.find('"', at, 200)] if at > 8 else ""
        start = _first_word(text, char_start, base) if text.startswith(("-", "/"), char_start) \
            else base
        if kind and not wanted(kind) and raw.find('"stmt":{"', at) < 0:
            yield Statement(start, end, kind, None, base)
            continue
        try:
            tree = decode(raw)
        except RecursionError:
            tree = deep_call(decode, raw)
            if tree is None:
                yield Statement(start, end, kind, None, base,
                                unparsed="nested too deeply to analyse")
                continue
        items = tree.get("stmts", [])
        for item in items:
            (item_kind, node), = item.get("stmt", {"": {}}).items()
            if len(items) > 1 and ascii_text:  # rare: locations still count from ``sql``
                at = item.get("stmt_location", 0)
                start = _first_word(text, char_start + at, base + at)
            yield Statement(start, end, item_kind, node, base)
            if item_kind == "DoStmt":
                yield from do_block(text[piece], node, base)


def _decode(raw: str) -> Node:
    """pglast's JSON (one object, nothing around it) as dicts: the C scanner alone, without
    ``json.loads``' checks for surrounding whitespace (15 % of decoding a statement)."""
    tree: Node = _SCAN(raw, 0)[0]
    return tree


def _fast_decode() -> Callable[[str], Node]:
    """orjson's parser, for long files: it decodes pglast's JSON in half the time of the
    standard library's scanner, which is a sixth of linting a 10,000-statement file; its
    import (~3 ms) is not worth it for a few statements. orjson stops at 1,024 levels of
    nesting: a statement that deep goes to :func:`_decode` (and its deep-stack path)."""
    import orjson  # noqa: PLC0415 -- long files only

    loads, too_deep = orjson.loads, orjson.JSONDecodeError

    def decode(raw: str) -> Node:
        try:
            tree: Node = loads(raw)
        except too_deep:
            return _decode(raw)
        return tree

    return decode


def _unparsable(text: str, char_start: int, sql: str, base: int, end: int,  # noqa: PLR0917
                exc: pg.ParseError) -> Statement:
    """An unparsed statement if the parser ran out of stack; else the file's ParseFailure."""
    message, cursor = _error_of(exc)
    if _too_deep(message):
        return Statement(_first_word(text, char_start, base), end, "", None, base,
                         unparsed="nested deeper than the parser allows")
    offset = char_start + cursor if cursor is not None else char_start + len(sql.rstrip())
    raise _failure_at(text, offset, message) from None


def do_block(sql: str, node: Node, base: int) -> Iterator[Statement]:
    """The SQL statements inside a ``DO`` block's PL/pgSQL body, as embedded statements.

    Each is found in the block's text (in order) to map its position back; dynamic
    ``EXECUTE 'constant SQL'`` is included. A body that does not parse as PL/pgSQL yields one
    unparsed statement.
    """
    language = "plpgsql"
    for item in node.get("args") or ():
        option = item.get("DefElem", {})
        if option.get("defname") == "language":
            language = str(option.get("arg", {}).get("String", {}).get("sval", "")).lower()
    if language != "plpgsql":
        return
    try:
        tree = json.loads(pg.parse_plpgsql_json(sql))
    except (pg.ParseError, RecursionError, ValueError) as exc:
        reason = str(exc.args[0]) if exc.args else type(exc).__name__
        yield Statement(base, base + len(sql.encode("utf-8")), "DoStmt", None, base,
                        embedded=True, unparsed=f"DO body not analysed: {reason}")
        return
    data = sql.encode("utf-8")
    search_from = 0
    for query in _plpgsql_queries(tree):
        found = data.find(query.encode("utf-8"), search_from)
        at = found if found >= 0 else 0
        if found >= 0:
            search_from = found + 1
        try:
            raw = pg.parse_sql_json(query)
            parsed = json.loads(raw)
        except (pg.ParseError, RecursionError, ValueError):
            continue  # PL/pgSQL variables can make a query unparsable as plain SQL
        for item in parsed.get("stmts", []):
            (kind, stmt), = item.get("stmt", {"": {}}).items()
            where = base + at
            yield Statement(where, where + len(query.encode("utf-8")), kind, stmt, where,
                            embedded=True)


def _plpgsql_queries(node: Any) -> Iterator[str]:
    """SQL text of ``execsql`` statements and of ``EXECUTE 'literal'`` in a PL/pgSQL tree."""
    stack = [node]
    found: list[str] = []
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            execsql = item.get("PLpgSQL_stmt_execsql")
            if execsql is not None:
                query = execsql.get("sqlstmt", {}).get("PLpgSQL_expr", {}).get("query")
                if query:
                    found.append(str(query))
            dynamic = item.get("PLpgSQL_stmt_dynexecute")
            if dynamic is not None:
                query = dynamic.get("query", {}).get("PLpgSQL_expr", {}).get("query", "")
                literal = _string_literal(str(query))
                if literal:
                    found.append(literal)
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    yield from found


def _string_literal(expression: str) -> str | None:
    """``'LOCK TABLE t'`` -> ``LOCK TABLE t``; anything but one plain literal -> None."""
    expression = expression.strip()
    if len(expression) < 2 or expression[0] != "'" or expression[-1] != "'":
        return None
    inner = expression[1:-1]
    if "'" in inner.replace("''", ""):
        return None
    return inner.replace("''", "'")


def _first_word(text: str, char_start: int, base: int) -> int:
    """Byte offset of the first word at or after ``char_start``, past blanks and comments."""
    pos = skip_blanks(text, char_start)
    skipped = text[char_start:pos]
    return base + (len(skipped) if skipped.isascii() else len(skipped.encode("utf-8")))
