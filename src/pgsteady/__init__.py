"""pgsteady: keep PostgreSQL-backed services standing. This module only re-exports.

Names are imported on first use (the command line starts faster that way).
"""

from __future__ import annotations

import importlib

from pgsteady._version import __version__

TYPE_CHECKING = False  # typing itself costs a lint run's start-up; mypy reads this as True

if TYPE_CHECKING:
    from typing import Any

    from pgsteady._core import DatabaseStats
    from pgsteady.arunner import AsyncDatabase
    from pgsteady.errors import (
        CacheUnavailable,
        CannotConnect,
        CircuitOpen,
        DatabaseClosed,
        DeadlineExceeded,
        LabError,
        LimitExceeded,
        MigrationBlocked,
        MigrationError,
        OutcomeUnknown,
        Overloaded,
        PgsteadyError,
        QueryFailed,
        UsageError,
    )
    from pgsteady.runner import DEFAULT, Database
    from pgsteady.settings import SessionSettings

# Where each name lives: imported on first use, so that `pgsteady lint` (which needs
# none of them) does not pay for psycopg, psycopg_pool or pglast's AST at start-up.
_SOURCES = {
    "AsyncDatabase": "pgsteady.arunner",
    "CacheUnavailable": "pgsteady.errors",
    "CannotConnect": "pgsteady.errors",
    "CircuitOpen": "pgsteady.errors",
    "DEFAULT": "pgsteady.runner",
    "Database": "pgsteady.runner",
    "DatabaseClosed": "pgsteady.errors",
    "DatabaseStats": "pgsteady._core",
    "DeadlineExceeded": "pgsteady.errors",
    "LabError": "pgsteady.errors",
    "LimitExceeded": "pgsteady.errors",
    "MigrationBlocked": "pgsteady.errors",
    "MigrationError": "pgsteady.errors",
    "OutcomeUnknown": "pgsteady.errors",
    "Overloaded": "pgsteady.errors",
    "PgsteadyError": "pgsteady.errors",
    "QueryFailed": "pgsteady.errors",
    "SessionSettings": "pgsteady.settings",
    "UsageError": "pgsteady.errors",
}

__all__ = [
    "DEFAULT",
    "AsyncDatabase",
    "CacheUnavailable",
    "CannotConnect",
    "CircuitOpen",
    "Database",
    "DatabaseClosed",
    "DatabaseStats",
    "DeadlineExceeded",
    "LabError",
    "LimitExceeded",
    "MigrationBlocked",
    "MigrationError",
    "OutcomeUnknown",
    "Overloaded",
    "PgsteadyError",
    "QueryFailed",
    "SessionSettings",
    "UsageError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """Import a re-exported name on first use (PEP 562)."""
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
