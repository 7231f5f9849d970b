"""pgsteady: keep PostgreSQL-backed services standing. This module only re-exports."""

from pgsteady._version import __version__
from pgsteady.errors import (
    CannotConnect,
    DatabaseClosed,
    DeadlineExceeded,
    LabError,
    MigrationBlocked,
    MigrationError,
    Overloaded,
    PgsteadyError,
    QueryFailed,
    UsageError,
)

__all__ = [
    "CannotConnect",
    "DatabaseClosed",
    "DeadlineExceeded",
    "LabError",
    "MigrationBlocked",
    "MigrationError",
    "Overloaded",
    "PgsteadyError",
    "QueryFailed",
    "UsageError",
    "__version__",
]
