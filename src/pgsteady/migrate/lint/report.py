"""What linting found: findings, files that do not parse, per-file and whole-run reports.

Plain data, importable without the parser: a warm cache renders a report from these alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Exit codes (the same numbers as :mod:`pgsteady.errors`, which imports psycopg).
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Literal

    Severity = Literal["error", "warning"]
else:
    Severity = str


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
    runner: str | None = None  # the runner profile the files were judged by

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
