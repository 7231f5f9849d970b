"""Migrations that give up fast, name their blocker, and never leave half-applied work.

This module only re-exports; see ``source`` (where migrations come from), ``apply``
(transactions, timeouts, retries), ``preflight`` (who is in the way), ``analysis`` (what each
statement locks) and ``testing`` (pytest helpers).

Names are imported on first use, so importing the package loads neither psycopg nor pglast.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing itself costs a lint run's start-up; mypy reads this as True

if TYPE_CHECKING:
    from typing import Any

    from pgsteady.migrate.alembic import run_alembic_migrations
    from pgsteady.migrate.apply import migrate, plan, run_preflight
    from pgsteady.migrate.policy import Applied, Policy
    from pgsteady.migrate.source import Migration, load_dir
    from pgsteady.sql.analysis import LockMode, SqlSyntaxError, StatementInfo, Target, analyze

# Where each name lives: imported on first use, so that `pgsteady lint` (which needs
# none of them) does not pay for psycopg, psycopg_pool or pglast's AST at start-up.
_SOURCES = {
    "Applied": "pgsteady.migrate.policy",
    "LockMode": "pgsteady.sql.analysis",
    "Migration": "pgsteady.migrate.source",
    "Policy": "pgsteady.migrate.policy",
    "SqlSyntaxError": "pgsteady.sql.analysis",
    "StatementInfo": "pgsteady.sql.analysis",
    "Target": "pgsteady.sql.analysis",
    "analyze": "pgsteady.sql.analysis",
    "load_dir": "pgsteady.migrate.source",
    "migrate": "pgsteady.migrate.apply",
    "plan": "pgsteady.migrate.apply",
    "run_alembic_migrations": "pgsteady.migrate.alembic",
    "run_preflight": "pgsteady.migrate.apply",
}

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


def __getattr__(name: str) -> Any:
    """Import a re-exported name on first use (PEP 562)."""
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # The lock analysis reads SQL with pglast: an extra (cli; alembic brings it too)
    from pgsteady._extras import needs  # noqa: PLC0415 -- lint's start-up skips contextlib

    extra = "alembic" if name == "run_alembic_migrations" else "cli"
    with needs(extra, f"pgsteady.migrate.{name}"):
        value = getattr(importlib.import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
