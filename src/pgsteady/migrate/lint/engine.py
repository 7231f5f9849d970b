"""Parse each file once, run the enabled rules over its statements, apply the ignore comments.

The parser's positions are byte offsets; they become ``line:col`` (columns in characters) only
for what gets reported. A file that does not parse yields one :class:`SyntaxProblem` with the
parser's message and position, never an exception.
"""

from __future__ import annotations

import gc
import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pglast import parser as pg

from pgsteady.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError
from pgsteady.migrate.lint.base import (
    Context,
    Hit,
    Node,
    Rule,
    unwrap,
)
from pgsteady.migrate.lint.config import LintConfig, check_rule_ids
from pgsteady.migrate.lint.rules import all_rules
from pgsteady.migrate.lint.suppress import UNUSED_IGNORE, Source, parse_ignores
from pgsteady.migrate.lint.track import track

Severity = Literal["error", "warning"]
_NO_TRANSACTION = re.compile(r"^--\s*pgsteady\s*:\s*no-transaction\s*(--.*)?$", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Finding:
    """One problem at one place. ``table``/``rows``/``size_bytes`` come from ``--dsn``."""

    path: str
    line: int
    col: int
    rule: str
    message: str
    help: str
    severity: Severity = "error"
    table: str | None = None
    rows: int | None = None
    size_bytes: int | None = None
    lock: str | None = None
    statement_line: int = 0
    statement_col: int = 0


@dataclass(frozen=True)
class SyntaxProblem:
    """A file that does not parse (or is not UTF-8): where, and the parser's words."""

    path: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.message}"


@dataclass
class FileReport:
    """What linting one file found."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    syntax_error: SyntaxProblem | None = None
    statements: int = 0


@dataclass
class LintReport:
    """Every file's report, and the exit code they add up to."""

    files: list[FileReport]

    @property
    def findings(self) -> list[Finding]:
        return [f for report in self.files for f in report.findings]

    @property
    def syntax_errors(self) -> list[SyntaxProblem]:
        return [r.syntax_error for r in self.files if r.syntax_error is not None]

    @property
    def statements(self) -> int:
        return sum(r.statements for r in self.files)

    @property
    def exit_code(self) -> int:
        """2 if a file did not parse, 1 if an error-level finding, else 0 (warnings pass)."""
        if self.syntax_errors:
            return EXIT_USAGE
        if any(f.severity == "error" for f in self.findings):
            return EXIT_FAILURE
        return EXIT_OK


@dataclass(frozen=True)
class _Raw:
    rule: Rule
    hit: Hit
    statement: int


class _Positions:
    """Byte offset -> (line, column in characters), 1-based."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.ascii = data.isascii()
        self.starts = [0, *(m.end() for m in re.finditer(b"\n", data))]

    def line_col(self, offset: int) -> tuple[int, int]:
        offset = max(0, min(offset, len(self.data)))
        index = bisect_right(self.starts, offset) - 1
        start = self.starts[index]
        if self.ascii:
            return index + 1, offset - start + 1
        return index + 1, len(self.data[start:offset].decode("utf-8", "ignore")) + 1


def _first_word(data: bytes, pos: int, end: int) -> int:
    """Move past whitespace and comments, so a statement's position is its first word."""
    while pos < end:
        if data[pos] in b" \t\r\n\f\v":
            pos += 1
        elif data.startswith(b"--", pos):
            newline = data.find(b"\n", pos)
            pos = end if newline < 0 else newline + 1
        elif data.startswith(b"/*", pos):
            close = data.find(b"*/", pos + 2)
            pos = end if close < 0 else close + 2
        else:
            break
    return pos


def _char_line_col(text: str, offset: int) -> tuple[int, int]:
    offset = max(0, min(offset, len(text)))
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _parse(text: str) -> list[Node] | tuple[int, str]:
    """The statements of ``text`` as JSON trees, or (character offset, message) if it fails."""
    nul = text.find("\x00")
    if nul >= 0:  # the C parser would stop there and silently drop the rest
        return nul, "NUL character in SQL text"
    try:
        raw = pg.parse_sql_json(text)
    except pg.ParseError as exc:
        message = _one_line(str(exc.args[0]) if exc.args else "syntax error")
        cursor = exc.args[1] if len(exc.args) > 1 else None
        # No cursor means "at end of input": point after the last non-blank character.
        return (cursor if isinstance(cursor, int) else len(text.rstrip())), message
    except UnicodeEncodeError as exc:
        return exc.start, f"text is not valid Unicode ({exc.reason})"
    try:
        stmts: list[Node] = json.loads(raw).get("stmts", [])
    except RecursionError:
        return 0, "statement nested too deeply to analyse; split the expression"
    return stmts


def _no_transaction(text: str) -> bool:
    """True if the header carries ``-- pgsteady: no-transaction`` (pgsteady migrate's directive:
    the runner then does not wrap the file in a transaction)."""
    if "no-transaction" not in text:
        return False
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

    The parse tree is hundreds of thousands of small dicts with no cycles; every collection
    while it is alive walks all of them again, which cost more than parsing did.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


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
            and (rule.min_pg_version is None or config.pg_version >= rule.min_pg_version)
        }
        self._dispatch: dict[str, list[Rule]] = {}
        for rule in self.rules.values():
            for kind in rule.statements:
                self._dispatch.setdefault(kind, []).append(rule)
        self._finishers = [r for r in self.rules.values() if r.finish is not None]
        self._alter_cache: dict[tuple[str, ...], list[Rule]] = {}

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

    def lint_file(self, path: Path, display: str | None = None) -> FileReport:
        """Read and lint one file; unreadable files are a usage error."""
        name = display or str(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line, col = _Positions(data[:exc.start]).line_col(exc.start)
            problem = SyntaxProblem(name, line, col, "not valid UTF-8")
            return FileReport(name, syntax_error=problem)
        return self.lint_text(text, name)

    def lint_text(self, text: str, path: str = "<stdin>") -> FileReport:
        """Lint SQL text; ``path`` is only used in what gets reported."""
        with _collector_paused():
            return self._lint_text(text, path)

    def _lint_text(self, text: str, path: str) -> FileReport:
        parsed = _parse(text)
        if isinstance(parsed, tuple):
            offset, message = parsed
            line, col = _char_line_col(text, offset)
            return FileReport(path, syntax_error=SyntaxProblem(path, line, col, message))
        data = text.encode("utf-8") if not text.isascii() else text.encode("ascii")
        end_of_data = len(data)
        starts: list[int] = []
        ends: list[int] = []
        raws: list[_Raw] = []
        in_transaction = self.config.assume_in_transaction and not _no_transaction(text)
        ctx = Context(pg_version=self.config.pg_version,
                      assume_runner_timeouts=self.config.assume_runner_timeouts,
                      assume_in_transaction=in_transaction)
        dispatch = self._dispatch
        for index, item in enumerate(parsed):
            begin = item.get("stmt_location", 0)
            length = item.get("stmt_len", 0)
            end = begin + length if length else end_of_data
            begin = _first_word(data, begin, end)
            starts.append(begin)
            ends.append(end)
            kind, stmt = unwrap(item.get("stmt", {}))
            rules: Sequence[Rule] = dispatch.get(kind, ())
            if kind == "AlterTableStmt":
                rules = self._alter_rules(stmt, rules)
            for rule in rules:
                for hit in rule.check(kind, stmt, ctx):
                    raws.append(_Raw(rule, hit, index))
            track(kind, stmt, ctx, begin)
        for rule in self._finishers:
            assert rule.finish is not None
            for hit in rule.finish(ctx):
                at = hit.location if hit.location is not None else end_of_data
                raws.append(_Raw(rule, hit, max(0, bisect_right(starts, at) - 1)))
        report = FileReport(path, statements=len(parsed))
        if not raws and "pgsteady:" not in text:
            return report
        report.findings = self._report(raws, Source(path, text, data, starts, ends))
        return report

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
            findings.append(self._finding(raw.rule, raw.hit, starts[raw.statement] if starts
                                          else 0, positions, path))
        for ignore in [*per_statement.values(), *whole_file.values()]:
            if not ignore.used and UNUSED_IGNORE in self.rules:
                hit = Hit(f"`{ignore.rule}` suppresses nothing here", ignore.offset)
                findings.append(self._finding(self.rules[UNUSED_IGNORE], hit, ignore.offset,
                                              positions, path))
        for rule_id, offset, detail in problems:
            if rule_id in self.rules:
                findings.append(self._finding(self.rules[rule_id], Hit(detail, offset), offset,
                                              positions, path))
        findings.sort(key=lambda f: (f.line, f.col, f.rule))
        return findings

    def _finding(self, rule: Rule, hit: Hit, statement_start: int, positions: _Positions,
                 path: str) -> Finding:
        line, col = positions.line_col(hit.location if hit.location is not None
                                       else statement_start)
        stmt_line, stmt_col = positions.line_col(statement_start)
        message = f"{rule.message} ({hit.detail})" if hit.detail else rule.message
        table = None
        if rule.size_aware and hit.table is not None:
            schema, name = hit.table
            table = f"{schema}.{name}" if schema else name
        severity: Severity = "warning" if rule.id in self.config.warn else "error"
        return Finding(path, line, col, rule.id, message, rule.help, severity, table=table,
                       statement_line=stmt_line, statement_col=stmt_col)


def collect_files(paths: Iterable[str]) -> list[Path]:
    """Files as given, and ``*.sql`` under folders (sorted); a missing path is a usage error."""
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.sql") if p.is_file())
            if not found:
                raise UsageError(f"no .sql files under {name}")
            out += found
        elif path.is_file():
            out.append(path)
        else:
            raise UsageError(f"{name}: no such file or folder")
    return out


def lint_paths(paths: Iterable[str], config: LintConfig | None = None) -> LintReport:
    """Lint files and folders with one configuration."""
    linter = Linter(config)
    return LintReport([linter.lint_file(path) for path in collect_files(paths)])
