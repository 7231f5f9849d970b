"""pgsteady: keep PostgreSQL-backed services standing. This module only re-exports."""

from pgsteady._core import DatabaseStats
from pgsteady._version import __version__
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
    Overloaded,
    PgsteadyError,
    QueryFailed,
    UsageError,
)
from pgsteady.runner import DEFAULT, Database
from pgsteady.settings import SessionSettings

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
    "Overloaded",
    "PgsteadyError",
    "QueryFailed",
    "SessionSettings",
    "UsageError",
    "__version__",
]
