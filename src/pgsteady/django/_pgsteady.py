"""Everything pgsteady.django takes from the rest of pgsteady, in one place.

pgsteady's internals are being rearranged (``migrate/lint`` -> ``lint``, the SQL knowledge
-> ``sql``, tools -> ``tools``); the Django modules import pgsteady only through this module,
so following a move is an edit here.
"""

from __future__ import annotations

from pgsteady.errors import (
    BadMigration,
    CannotConnect,
    MigrationBlocked,
    MigrationError,
    PgsteadyError,
    UsageError,
)
from pgsteady.migrate import preflight, queries
from pgsteady.migrate.apply import (
    RETRYABLE,
    Attempt,
    Policy,
    backstop,
    describe_pg_error,
    pg_error,
    runner_lock,
    statements_of,
    with_lock_retries,
)
from pgsteady.migrate.layouts import UpPart
from pgsteady.migrate.lint import output as lint_output
from pgsteady.migrate.lint import runners as lint_runners
from pgsteady.migrate.lint import sizes as lint_sizes
from pgsteady.migrate.lint.config import LintConfig, load_config
from pgsteady.migrate.lint.engine import Linter
from pgsteady.migrate.lint.files import Unit
from pgsteady.migrate.lint.report import FileReport, Finding, LintReport, SyntaxProblem
from pgsteady.migrate.preflight import Blocker, Report
from pgsteady.migrate.source import Migration, parts_of
from pgsteady.migrate.watch import BlockerWatch
from pgsteady.settings import SessionSettings, pg_interval, redact, scrub, server_timeout

__all__ = [
    "RETRYABLE",
    "Attempt",
    "BadMigration",
    "Blocker",
    "BlockerWatch",
    "CannotConnect",
    "FileReport",
    "Finding",
    "LintConfig",
    "LintReport",
    "Linter",
    "Migration",
    "MigrationBlocked",
    "MigrationError",
    "PgsteadyError",
    "Policy",
    "Report",
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
    "statements_of",
    "with_lock_retries",
]
