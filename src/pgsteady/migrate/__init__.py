"""Migrations that give up fast, name their blocker, and never leave half-applied work.

This module only re-exports; see ``source`` (where migrations come from), ``apply``
(transactions, timeouts, retries), ``preflight`` (who is in the way), ``analysis`` (what each
statement locks) and ``testing`` (pytest helpers).
"""

from pgsteady.migrate.alembic import run_alembic_migrations
from pgsteady.migrate.analysis import LockMode, SqlSyntaxError, StatementInfo, Target, analyze
from pgsteady.migrate.apply import Applied, Policy, migrate, plan, run_preflight
from pgsteady.migrate.source import Migration, load_dir

__all__ = [
    "Applied",
    "LockMode",
    "Migration",
    "Policy",
    "SqlSyntaxError",
    "StatementInfo",
    "Target",
    "analyze",
    "load_dir",
    "migrate",
    "plan",
    "run_alembic_migrations",
    "run_preflight",
]
