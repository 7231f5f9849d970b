"""Everything pgsteady.django takes from the rest of pgsteady, in one place.

The Django modules import the rest of pgsteady only through this module (migrate's retries
and blocker watch, lint, the django tool's conventions), so following a move is an edit here.
"""

from __future__ import annotations

from pgsteady.errors import (
    BadMigration,
    CannotConnect,
    MigrationBlocked,
    MigrationError,
    PgsteadyError,
    ServerWentAway,
    UsageError,
)
from pgsteady.health import CONTENT_TYPE, Check, CheckResult, Health, status_code
from pgsteady.lint import output as lint_output
from pgsteady.lint import runners as lint_runners
from pgsteady.lint import sizes as lint_sizes
from pgsteady.lint.config import LintConfig, load_config
from pgsteady.lint.engine import Linter
from pgsteady.lint.files import Unit
from pgsteady.lint.report import FileReport, Finding, LintReport, SyntaxProblem
from pgsteady.migrate import preflight, queries
from pgsteady.migrate.apply import (
    RETRYABLE,
    Attempt,
    Policy,
    backstop,
    describe_pg_error,
    pg_error,
    runner_lock,
    session_lost,
    statements_of,
    with_lock_retries,
)
from pgsteady.migrate.preflight import Blocker, Report
from pgsteady.migrate.source import Migration, parts_of
from pgsteady.migrate.watch import BlockerWatch
from pgsteady.settings import SessionSettings, pg_interval, redact, scrub, server_timeout
from pgsteady.tools._base import UpPart
from pgsteady.tools.django import DJANGO_HELP

__all__ = [
    "CONTENT_TYPE",
    "DJANGO_HELP",
    "RETRYABLE",
    "Attempt",
    "BadMigration",
    "Blocker",
    "BlockerWatch",
    "CannotConnect",
    "Check",
    "CheckResult",
    "FileReport",
    "Finding",
    "Health",
    "LintConfig",
    "LintReport",
    "Linter",
    "Migration",
    "MigrationBlocked",
    "MigrationError",
    "PgsteadyError",
    "Policy",
    "Report",
    "ServerWentAway",
    "SessionSettings",
    "SyntaxProblem",
    "Unit",
    "UpPart",
    "UsageError",
    "backstop",
    "describe_pg_error",
    "lint_output",
    "lint_runners",
    "lint_sizes",
    "load_config",
    "parts_of",
    "pg_error",
    "pg_interval",
    "preflight",
    "queries",
    "redact",
    "runner_lock",
    "scrub",
    "server_timeout",
    "session_lost",
    "statements_of",
    "status_code",
    "with_lock_retries",
]
