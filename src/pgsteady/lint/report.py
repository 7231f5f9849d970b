"""What linting found: findings, files that do not parse, per-file and whole-run reports.

Plain data, importable without the parser: a warm cache renders a report from these alone.
"""

from __future__ import annotations

from pgsteady._record import Record

#: Exit codes (the same numbers as :mod:`pgsteady.errors`, which imports psycopg).
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Final, Literal

    Severity = Literal["error", "warning"]
else:
    Severity = str


class Finding(Record):
    """One problem at one place. ``table``/``rows``/``size_bytes`` come from ``--dsn``."""

    __slots__ = (
        "col",
        "help",
        "line",
        "lock",
        "message",
        "path",
        "rows",
        "rule",
        "severity",
        "size_bytes",
        "statement_col",
        "statement_line",
        "table",
    )

    def __init__(self, path: str, line: int, col: int, rule: str, message: str,  # noqa: PLR0917
                 help: str, severity: Severity = "error", table: str | None = None,
                 rows: int | None = None, size_bytes: int | None = None,
                 lock: str | None = None, statement_line: int = 0,
                 statement_col: int = 0) -> None:
        self.path: Final = path
        self.line: Final = line
        self.col: Final = col
        self.rule: Final = rule
        self.message: Final = message
        self.help: Final = help
        self.severity: Final = severity
        self.table: Final = table
        self.rows: Final = rows
        self.size_bytes: Final = size_bytes
        self.lock: Final = lock
        self.statement_line: Final = statement_line
        self.statement_col: Final = statement_col


class SyntaxProblem(Record):
    """A file that does not parse (or is not UTF-8): where, and the parser's words."""

    __slots__ = ("col", "line", "message", "path")

    def __init__(self, path: str, line: int, col: int, message: str) -> None:
        self.path: Final = path
        self.line: Final = line
        self.col: Final = col
        self.message: Final = message

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.message}"


class FileReport(Record):
    """What linting one file found."""

    __slots__ = ("findings", "path", "statements", "syntax_error")
    __hash__ = None  # type: ignore[assignment]  # changes after it is made

    def __init__(self, path: str, findings: list[Finding] | None = None,
                 syntax_error: SyntaxProblem | None = None, statements: int = 0) -> None:
        self.path = path
        self.findings: list[Finding] = [] if findings is None else findings
        self.syntax_error = syntax_error
        self.statements = statements


class LintReport(Record):
    """Every file's report, and the exit code they add up to."""

    __slots__ = ("files", "runner", "skipped")
    __hash__ = None  # type: ignore[assignment]  # changes after it is made

    def __init__(self, files: list[FileReport], runner: str | None = None,
                 skipped: list[tuple[str, str]] | None = None) -> None:
        self.files = files
        self.runner = runner  # the runner profile the files were judged by
        #: Files of the folders given that were not linted, and why (path, reason).
        self.skipped: list[tuple[str, str]] = [] if skipped is None else skipped

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
