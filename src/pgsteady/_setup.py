"""What an executor derives from its constructor arguments, checked once, before anything is
queued or connected: the session settings for its pooler, the pool's sizes and keyword
arguments, and the one-line UsageErrors for what cannot work (``pgsteady._core`` keeps the
rules of a job's life; this module, the set-up around them).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from pgsteady._core import deadline_of
from pgsteady.errors import UsageError
from pgsteady.settings import Duration, SessionSettings, describe, server_timeout

log = logging.getLogger("pgsteady.runner")

SLOTS_QUERY = ("SELECT current_setting('max_connections')::int, "
               "current_setting('superuser_reserved_connections')::int")
"""The server's connection slots, read once on the first direct connection."""


@dataclass(frozen=True)
class Setup:
    """What both runners derive from their constructor arguments, derived once here."""

    settings: SessionSettings
    pool_size: int
    max_waiting: int
    default_deadline: float | None
    connect_timeout: float
    prefix: str
    set_query: tuple[str, tuple[str, ...]]

    @classmethod
    def of(cls, *, pool_size: int, max_waiting: int | None, service: str, pooler: str,
           statement_timeout: Duration, lock_timeout: Duration,
           idle_in_transaction_timeout: Duration, deadline: Duration,
           connect_timeout: Duration) -> Setup:
        if not isinstance(service, str) or not isinstance(pooler, str):
            raise UsageError(f"service and pooler must be strings; got {service!r}, {pooler!r}")
        settings = SessionSettings(
            service=service, pooler=pooler,
            statement_timeout=server_timeout(statement_timeout, "statement_timeout"),
            lock_timeout=server_timeout(lock_timeout, "lock_timeout"),
            idle_in_transaction_timeout=server_timeout(idle_in_transaction_timeout,
                                                       "idle_in_transaction_timeout"))
        return cls(
            settings=settings, pool_size=pool_size,
            max_waiting=check_sizes(pool_size, max_waiting),
            default_deadline=deadline_of(deadline),
            connect_timeout=server_timeout(connect_timeout, "connect_timeout") or 10.0,
            prefix=transaction_prefix(settings) if pooler == "transaction" else "",
            set_query=settings.set_query())

    def pool_args(self) -> dict[str, Any]:
        """Keyword arguments for ``ConnectionPool`` / ``AsyncConnectionPool``: a fixed size
        (workers == connections), autocommit, and the session settings for this pooler."""
        return {
            "min_size": self.pool_size, "max_size": self.pool_size, "open": False,
            "name": self.settings.service,
            "timeout": self.connect_timeout,
            "kwargs": {"autocommit": True, "connect_timeout": max(2, round(self.connect_timeout)),
                       **self.settings.connect_kwargs()},
        }


def check_statement(query: object, params: object, *, bytes_ok: bool) -> None:
    """A statement's types, checked in the caller before it is queued (a TypeError from a
    worker would arrive as if the database had failed)."""
    kinds: tuple[type, ...] = (str, bytes, sql.Composable) if bytes_ok else (str, sql.Composable)
    if not isinstance(query, kinds):
        raise UsageError(f"query must be a string{', bytes' if bytes_ok else ''} or a "
                         f"psycopg.sql.Composable, got {type(query).__name__}")
    if params is not None and (isinstance(params, str | bytes)
                               or not isinstance(params, Sequence | Mapping)):
        raise UsageError(f"params must be a sequence (tuple, list), a mapping or None, got "
                         f"{type(params).__name__}")


def check_conninfo(conninfo: object) -> None:
    """Refuse a connection string libpq cannot parse now, not by retrying it forever later.
    (libpq's message may quote the string, password included, so it is not repeated.)"""
    if not isinstance(conninfo, str):
        raise UsageError(f"conninfo must be a string, got {type(conninfo).__name__}")
    try:
        conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        raise UsageError("conninfo is not a valid libpq connection string or URL; check "
                         "its key=value pairs or its postgresql:// form") from None


def warn_if_pool_too_big(pool_size: int, max_connections: int, reserved: int) -> None:
    """A pool that takes most of the server's connection slots starves every other client
    (and a second instance of the same service): say so once, with the numbers."""
    slots = max_connections - reserved
    if pool_size > slots // 2:
        log.warning(
            "pool_size=%d takes %s of the server's %d connection slots (max_connections=%d, "
            "%d reserved): other clients and other instances of this service will be refused; "
            "lower pool_size or put PgBouncer in front", pool_size,
            "all" if pool_size >= slots else "more than half", slots, max_connections,
            reserved)


def not_in_transaction_mode(exc: psycopg.errors.ActiveSqlTransaction) -> UsageError:
    """Behind a transaction pooler each statement shares its implicit transaction with the
    session settings, so statements that refuse a transaction block cannot run there."""
    error = UsageError(
        f"{describe(exc)}: with pooler='transaction' every statement runs in a transaction "
        f"(with its SET LOCAL timeouts), so VACUUM, CREATE INDEX CONCURRENTLY and the like "
        f"cannot; run them on a direct connection (a Database with pooler='direct')")
    error.__cause__ = exc
    return error


def check_sizes(pool_size: int, max_waiting: int | None) -> int:
    for name, value in (("pool_size", pool_size), ("max_waiting", max_waiting)):
        if (value is not None or name == "pool_size") and (
                isinstance(value, bool) or not isinstance(value, int)):
            raise UsageError(f"{name} must be a whole number, got {value!r}")
    if pool_size < 1:
        raise UsageError(f"pool_size must be at least 1, got {pool_size}")
    if max_waiting is None:
        return 4 * pool_size
    if max_waiting < 1:
        raise UsageError(f"max_waiting must be at least 1 (every job waits in the backlog, "
                         f"if only for a moment), got {max_waiting}")
    return max_waiting


def transaction_prefix(settings: SessionSettings) -> str:
    """``SELECT set_config(..., true), ...; `` sent in front of a statement (one simple Query):
    PostgreSQL runs a multi-statement Query as one implicit transaction, so the settings are
    local to it and the whole call costs one round trip behind a transaction pooler."""
    calls = ", ".join(f"set_config('{name}', '{value}', true)"
                      for name, value in settings.values().items())
    return f"SELECT {calls}; "
