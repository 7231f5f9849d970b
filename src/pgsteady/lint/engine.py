"""Parse each file once, run the enabled rules over its statements, apply the ignore comments.

Files are linted in order against one :class:`~pgsteady.lint.schema.Schema`, so a
rule can ask what earlier files built (the old type of a column, whether a table is new).
History files (``--history``) are only replayed into it. Statements come one at a time from
:mod:`pgsteady.lint.parse`, so memory stays flat on big data files.

The parser's positions are byte offsets; they become ``line:col`` (columns in characters) only
for what gets reported. A file that does not parse yields one :class:`SyntaxProblem` with the
parser's message and position (and a hint when a ``;`` is likely missing), never an exception.
"""

from __future__ import annotations

import gc
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from pathlib import Path

from pgsteady import _majors
from pgsteady._debuglog import debug
from pgsteady.lint import parse
from pgsteady.lint.base import Context, Hit, Node, Rule
from pgsteady.lint.config import LintConfig, check_rule_ids
from pgsteady.lint.deep import deep_call
from pgsteady.lint.files import Unit, collect_files, read_sql
from pgsteady.lint.report import (
    FileReport,
    Finding,
    LintReport,
    Severity,
    SyntaxProblem,
)
from pgsteady.lint.rules import all_rules
from pgsteady.lint.schema import REPLAYED, Schema
from pgsteady.lint.suppress import UNUSED_IGNORE, Source, parse_ignores
from pgsteady.lint.track import TRACKED, forget_emptied, note_after_commit, track
from pgsteady.sql.text import fill_placeholders, placeholder_shown, skip_blanks
from pgsteady.tools import sqlx

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Final

__all__ = ["FileReport", "Finding", "LintReport", "Linter", "SyntaxProblem", "Unit",
           "collect_files", "lint_paths", "read_sql"]


LOGGER = "pgsteady.lint"
UNPARSED = "unparsed-statement"
META_COMMAND = "psql-meta-command"
_NO_TRANSACTION = re.compile(r"^--\s*pgsteady\s*:\s*no-transaction\s*(--.*)?$", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class _Raw:
    """A rule's hit before suppression: the statement's index and the byte offset."""

    __slots__ = ("hit", "location", "rule", "statement")

    def __init__(self, rule: Rule, hit: Hit, statement: int, location: int) -> None:
        self.rule: Final = rule
        self.hit: Final = hit
        self.statement: Final = statement
        self.location: Final = location


class _Positions:
    """Byte offset -> (line, column in characters), 1-based."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.ascii = data.isascii()
        starts = [0]
        find, at = data.find, data.find(b"\n")
        while at >= 0:  # one per line of the file
            starts.append(at + 1)
            at = find(b"\n", at + 1)
        self.starts = starts

    def line_col(self, offset: int) -> tuple[int, int]:
        offset = max(0, min(offset, len(self.data)))
        index = bisect_right(self.starts, offset) - 1
        start = self.starts[index]
        if self.ascii:
            return index + 1, offset - start + 1
        return index + 1, len(self.data[start:offset].decode("utf-8", "ignore")) + 1


def _char_line_col(text: str, offset: int) -> tuple[int, int]:
    offset = max(0, min(offset, len(text)))
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def no_transaction_header(text: str) -> bool:
    """True if the header carries ``-- pgsteady: no-transaction`` (pgsteady migrate's directive:
    the runner then does not wrap the file in a transaction), or the first line is sqlx's
    ``-- no-transaction``, which pgsteady migrate honours too."""
    if "no-transaction" not in text:
        return False
    if sqlx.no_transaction(text):
        return True
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("--"):
            return False
        if _NO_TRANSACTION.match(stripped):
            return True
    return False


def _one_line(message: str, limit: int = 200) -> str:
    """The parser quotes the text it choked on, newlines and all; keep the report one line."""
    message = _CONTROL.sub(lambda m: repr(m[0])[1:-1], message)
    return message if len(message) <= limit else message[:limit - 3] + "..."


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a file is linted.

    The parse trees are many small dicts with no cycles; every collection while they are
    alive walks all of them again, which cost more than parsing did.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _lone_statement_outside(statements: Iterator[parse.Statement],
                            ) -> tuple[bool, Iterator[parse.Statement]]:
    """(in a transaction?, the same statements) for a file sent as one multi-statement
    query: one statement runs on its own, several run as one implicit transaction."""
    top: list[parse.Statement] = []
    for statement in statements:
        top.append(statement)
        if sum(not s.embedded for s in top) > 1:
            return True, chain(top, statements)
    return False, iter(top)


class Linter:
    """The enabled rules for one configuration; lint texts and files with them."""

    def __init__(self, config: LintConfig | None = None) -> None:
        self.config = config = config or LintConfig()
        rules = all_rules()
        where = config.source or "configuration"
        check_rule_ids(config.disable | config.enable | config.warn, rules, where)
        self.rules = {
            rule_id: rule for rule_id, rule in rules.items()
            if (rule.default_enabled or rule_id in config.enable)
            and rule_id not in config.disable
            and (rule.min_pg_version is None
                 or _majors.supports(config.pg_version, rule.min_pg_version))
        }
        self._dispatch: dict[str, list[Rule]] = {}
        for rule in self.rules.values():
            for kind in rule.statements:
                self._dispatch.setdefault(kind, []).append(rule)
        self._finishers = [r for r in self.rules.values() if r.finish is not None]
        self._alter_cache: dict[tuple[str, ...], list[Rule]] = {}
        wanted = {kind.partition(".")[0] for kind in self._dispatch}
        self._wanted = frozenset(wanted | TRACKED | REPLAYED | {"DoStmt"}).__contains__
        self._replayed = frozenset(REPLAYED | {"DoStmt"}).__contains__

    def _alter_rules(self, stmt: Node, rules: Sequence[Rule]) -> Sequence[Rule]:
        """Rules for an ALTER TABLE: those for any ALTER plus those for its subcommands.

        Rules name subcommands as ``AlterTableStmt.AT_AddColumn``; most ALTERs have one,
        so most rules are never called for them.
        """
        subtypes = tuple(item.get("AlterTableCmd", {}).get("subtype", "")
                         for item in stmt.get("cmds") or ())
        cached = self._alter_cache.get(subtypes)
        if cached is None:
            extra: list[Rule] = []
            for subtype in subtypes:
                for rule in self._dispatch.get(f"AlterTableStmt.{subtype}", ()):
                    if rule not in extra and rule not in rules:
                        extra.append(rule)
            cached = self._alter_cache[subtypes] = [*rules, *extra]
        return cached

    # -- entry points ----------------------------------------------------------------

    def lint_file(self, path: Path, display: str | None = None,
                  schema: Schema | None = None) -> FileReport:
        """Read and lint one file; unreadable files are a usage error."""
        name = display or str(path)
        text = read_sql(path, name)
        if isinstance(text, SyntaxProblem):
            return FileReport(name, syntax_error=text)
        return self.lint_text(text, name, schema=schema)

    def lint_text(self, text: str, path: str = "<stdin>", *, schema: Schema | None = None,
                  in_transaction: bool | None = True, runner_timeouts: bool = True,
                  ) -> FileReport:
        """Lint SQL text; ``path`` is only used in what gets reported.

        ``schema`` is what earlier files built (it is updated). The configuration's
        ``assume_runner_timeouts``, when set, wins over ``runner_timeouts``;
        ``assume_in_transaction`` can only take the transaction away: a file its tool runs
        outside one (``in_transaction=False``: a no-transaction header or marker, or a tool
        that never opens one) stays outside, since saying otherwise would hide the findings
        that matter there.
        """
        config = self.config
        if config.assume_in_transaction is not None:
            in_transaction = config.assume_in_transaction and in_transaction is not False
        if in_transaction is True and no_transaction_header(text):
            in_transaction = False
        if config.assume_runner_timeouts is not None:
            runner_timeouts = config.assume_runner_timeouts
        with _collector_paused():
            return self._lint_text(text, path, schema if schema is not None else Schema(),
                                   in_transaction, runner_timeouts)

    def start(self, history: Iterable[Unit] = ()) -> Schema:
        """A schema with ``history`` replayed: the state before the files to check.

        Without history each file checked is its own change (a table is new only in the file
        that creates it); with history, the files checked are one change together.
        """
        schema = Schema(file_serial=-1)
        for unit in history:
            schema.file_serial += 1
            self.replay_text(unit.text, schema)
            schema.one_change = True
        schema.change_start = schema.file_serial + 1
        return schema

    def lint_units(self, units: Iterable[Unit], history: Iterable[Unit] = (),
                   schema: Schema | None = None) -> LintReport:
        """Lint files in order against one schema (``schema``, else :meth:`start` of
        ``history``), which they update."""
        if schema is None:
            schema = self.start(history)
        reports = []
        for unit in units:
            schema.file_serial += 1
            if not schema.one_change:
                schema.change_start = schema.file_serial
            report = self.lint_text(unit.text, unit.display, schema=schema,
                                    in_transaction=unit.in_transaction,
                                    runner_timeouts=unit.runner_timeouts)
            reports.append(_placeholders_shown(report, unit.placeholders)
                           if unit.placeholders else report)
        return LintReport(reports)

    def replay_text(self, text: str, schema: Schema) -> None:
        """Learn what ``text`` builds, without checking it (a file before the change)."""
        with _collector_paused():
            try:
                for statement in parse.statements(parse.blank_meta_commands(text)[0],
                                                  self._replayed):
                    if statement.node is not None:
                        schema.apply(statement.kind, statement.node)
            except parse.ParseFailure as failure:
                debug(LOGGER, "history file stops parsing at %d: %s", failure.offset,
                          failure.message)

    # -- one file ----------------------------------------------------------------------

    def _lint_text(self, text: str, path: str, schema: Schema, in_transaction: bool | None,
                   runner_timeouts: bool) -> FileReport:
        nul = text.find("\x00")
        if nul >= 0:  # the C parser would stop there and silently drop the rest
            line, col = _char_line_col(text, nul)
            return FileReport(path, syntax_error=SyntaxProblem(
                path, line, col, "NUL character in SQL text"))
        blanked, notes = parse.blank_meta_commands(text)
        data = blanked.encode("utf-8")
        statements: Iterator[parse.Statement] = parse.statements(blanked, self._wanted)
        ctx = Context(pg_version=self.config.pg_version,
                      assume_runner_timeouts=runner_timeouts, schema=schema, source=data)
        starts: list[int] = []
        ends: list[int] = []
        raws: list[_Raw] = []
        try:
            if in_transaction is None:
                in_transaction, statements = _lone_statement_outside(statements)
                ctx.implicit_transaction = in_transaction
            ctx.assume_in_transaction = in_transaction
            for statement in statements:
                if not statement.embedded:
                    starts.append(statement.start)
                    ends.append(statement.end)
                self._check(statement, ctx, raws, len(starts) - 1)
        except parse.ParseFailure as failure:
            line, col = _char_line_col(blanked, failure.offset)
            return FileReport(path, syntax_error=SyntaxProblem(path, line, col,
                                                               _one_line(failure.message)))
        for rule in self._finishers:
            assert rule.finish is not None
            for hit in rule.finish(ctx):
                at = hit.location if hit.location is not None else len(data)
                raws.append(_Raw(rule, hit, max(0, bisect_right(starts, at) - 1), at))
        if META_COMMAND in self.rules:
            for note in notes:
                index = max(0, bisect_right(starts, note.offset) - 1)
                raws.append(_Raw(self.rules[META_COMMAND],
                                 Hit(note.text[:80]), index, note.offset))
        report = FileReport(path, statements=len(starts))
        if not raws and "pgsteady:" not in text:
            return report
        report.findings = self._report(raws, Source(path, blanked, data, starts, ends))
        return report

    def _check(self, statement: parse.Statement, ctx: Context, raws: list[_Raw],
               index: int) -> None:
        """Run the rules on one statement, then learn from it."""
        if not statement.embedded:
            note_after_commit(statement.kind, statement.start, ctx)
        if statement.unparsed is not None:
            if UNPARSED in self.rules:
                raws.append(_Raw(self.rules[UNPARSED], Hit(statement.unparsed), index,
                                 statement.start))
            forget_emptied(statement.kind, ctx)
            return
        stmt = statement.node
        if stmt is None:
            forget_emptied(statement.kind, ctx)
            return
        kind = statement.kind
        rules: Sequence[Rule] = self._dispatch.get(kind, ())
        if kind == "AlterTableStmt":
            rules = self._alter_rules(stmt, rules)
        ctx.in_do_block = statement.embedded
        base, start = statement.base, statement.start
        try:
            for rule in rules:
                for hit in rule.check(kind, stmt, ctx):
                    if hit.location is not None:
                        at = base + hit.location
                    elif hit.command is not None and not statement.embedded:
                        at = base + command_start(ctx.source[base:statement.end], stmt,
                                                  hit.command, start - base)
                    else:
                        at = start
                    raws.append(_Raw(rule, hit, index, at))
        except RecursionError:
            deep_call(self._check_deep, rules, kind, stmt, ctx, raws, index, (base, start))
        track(kind, stmt, ctx, start)
        ctx.schema.apply(kind, stmt)
        ctx.in_do_block = False

    @staticmethod
    def _check_deep(rules: Sequence[Rule], kind: str, stmt: Node, ctx: Context,  # noqa: PLR0917
                    raws: list[_Raw], index: int, where: tuple[int, int]) -> None:
        """The rules again for a statement nested too deep for the default stack."""
        base, start = where
        found = []
        for rule in rules:
            for hit in rule.check(kind, stmt, ctx):
                found.append(_Raw(rule, hit, index,
                                  base + hit.location if hit.location is not None else start))
        kept = {(r.rule.id, r.location) for r in raws}
        raws.extend(r for r in found if (r.rule.id, r.location) not in kept)

    def _report(self, raws: list[_Raw], source: Source) -> list[Finding]:
        per_statement, whole_file, problems = parse_ignores(source, self.rules, all_rules())
        positions, path, starts = _Positions(source.data), source.path, source.starts
        findings: list[Finding] = []
        for raw in raws:
            rule_id = raw.rule.id
            ignore = per_statement.get((raw.statement, rule_id)) or whole_file.get(rule_id)
            if ignore is not None:
                ignore.used = True
                continue
            findings.append(self._finding(raw.rule, raw.hit, raw.location,
                                          starts[raw.statement] if starts else 0,
                                          positions, path))
        for ignore in [*per_statement.values(), *whole_file.values()]:
            if not ignore.used and UNUSED_IGNORE in self.rules:
                hit = Hit(f"`{ignore.rule}` suppresses nothing here")
                findings.append(self._finding(self.rules[UNUSED_IGNORE], hit, ignore.offset,
                                              ignore.offset, positions, path))
        for rule_id, offset, detail in problems:
            if rule_id in self.rules:
                findings.append(self._finding(self.rules[rule_id], Hit(detail), offset,
                                              offset, positions, path))
        findings.sort(key=lambda f: (f.line, f.col, f.rule))
        return findings

    def _finding(self, rule: Rule, hit: Hit, location: int, statement_start: int,  # noqa: PLR0917
                 positions: _Positions, path: str) -> Finding:
        line, col = positions.line_col(location)
        stmt_line, stmt_col = positions.line_col(statement_start)
        message = f"{rule.message} ({hit.detail})" if hit.detail else rule.message
        table = None
        if rule.size_aware and hit.table is not None:
            schema, name = hit.table
            table = f"{schema}.{name}" if schema else name
        severity: Severity = hit.severity or rule.severity
        if rule.id in self.config.warn:
            severity = "warning"
        return Finding(path, line, col, rule.id, message,
                       rule.help_for(self.config.pg_version), severity, table=table,
                       statement_line=stmt_line, statement_col=stmt_col)


_STARTS = "__pgsteady_command_starts"
_COMMENTS = frozenset({"SQL_COMMENT", "C_COMMENT"})


def command_start(sql: bytes, stmt: Node, command: Node, default: int) -> int:
    """Where an ALTER TABLE subcommand starts, as a byte offset into the statement ``sql``
    (the parser gives subcommands no location): after the table's name, and after each comma
    outside parentheses, the scanner's tokens say. ``default`` if they do not tell."""
    starts: list[int] | None = stmt.get(_STARTS)
    if starts is None:
        starts = stmt[_STARTS] = _command_starts(sql, stmt)
    commands = [item.get("AlterTableCmd") for item in stmt.get("cmds") or ()]
    index = next((i for i, cmd in enumerate(commands) if cmd is command), None)
    if index is None or len(starts) != len(commands):
        return default
    return starts[index]


def _command_starts(sql: bytes, stmt: Node) -> list[int]:
    at = (stmt.get("relation") or {}).get("location")
    if isinstance(at, int) and len(stmt.get("cmds") or ()) == 1 and sql.isascii():
        lone = _lone_command_start(sql.decode("ascii"), at)
        if lone is not None:
            return [lone]
    return _scanned_command_starts(sql, stmt)


def _scanned_command_starts(sql: bytes, stmt: Node) -> list[int]:
    """Every subcommand's start, from the scanner's tokens."""
    at = (stmt.get("relation") or {}).get("location")
    text = sql.decode("utf-8", "replace")
    tokens = [t for t in parse.tokens(text) if t.name not in _COMMENTS]
    if not isinstance(at, int) or not tokens:
        return []
    at = len(sql[:at].decode("utf-8", "ignore"))  # the name's byte offset, in characters
    first = next((i for i, token in enumerate(tokens) if token.start >= at), len(tokens))
    i = first + 1
    while i + 1 < len(tokens) and tokens[i].name == "ASCII_46":  # schema.table
        i += 2
    if i < len(tokens) and tokens[i].name == "ASCII_42":  # ALTER TABLE t* (inheritance)
        i += 1
    found: list[int] = []
    depth, expect = 0, True
    for token in tokens[i:]:
        if expect:
            found.append(token.start)
            expect = False
        if token.name == "ASCII_40":
            depth += 1
        elif token.name == "ASCII_41":
            depth -= 1
        elif depth == 0 and token.name == "ASCII_44":
            expect = True
        elif depth == 0 and token.name == "ASCII_59":
            break
    if text.isascii():
        return found
    return [len(text[:start].encode("utf-8")) for start in found]


# A table's name as written (quoted or not, schema-qualified), for the lone-command fast path.
_NAME_PART = r'(?:"(?:[^"]|"")*"|[^\x00-@\[-\^`{-\x7f][^\x00-#%-/:-@\[-\^`{-\x7f]*)'
_QUALIFIED = re.compile(rf"{_NAME_PART}(?:[ \t\n\r\f\v]*\.[ \t\n\r\f\v]*{_NAME_PART})*")


def _lone_command_start(text: str, at: int) -> int | None:
    """Where the only subcommand of an ALTER TABLE starts: the first word after the table's
    name (at ``at``) and an optional ``*``, skipping blanks and comments, without scanning
    the statement (most ALTERs have one subcommand; a scan is a tenth of linting them).
    None when the text is not that plain (a comment inside the name, ``U&"..."``): the
    scanner's tokens decide then."""
    name = _QUALIFIED.match(text, at)
    if name is None:
        return None
    pos = skip_blanks(text, name.end())
    if text.startswith("*", pos):
        pos = skip_blanks(text, pos + 1)
    return pos if pos < len(text) and text[pos].isalpha() else None


def _placeholders_shown(report: FileReport, names: tuple[str, ...]) -> FileReport:
    """Findings that name a filled-in placeholder show it as ``{{name}}``, not the padding."""
    shown = {name: placeholder_shown(name) for name in names}

    def show(text: str) -> str:
        for name, label in shown.items():
            text = text.replace(name, label)
        return text

    report.findings = [f.replace(message=show(f.message),
                                 table=show(f.table) if f.table else f.table)
                       for f in report.findings]
    return report


def lint_paths(paths: Iterable[str], config: LintConfig | None = None) -> LintReport:
    """Lint files and folders with one configuration, in order, against one schema."""
    linter = Linter(config)
    units: list[Unit] = []
    broken: dict[int, FileReport] = {}
    for path in collect_files(paths):
        text = read_sql(path)
        if isinstance(text, SyntaxProblem):
            broken[len(units)] = FileReport(str(path), syntax_error=text)
            units.append(Unit(str(path), ""))
        else:
            filled, names = fill_placeholders(text)
            units.append(Unit(str(path), filled, placeholders=names))
    report = linter.lint_units(units)
    for index, file in broken.items():
        report.files[index] = file
    return report
