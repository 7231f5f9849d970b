"""The migration runner's session: connecting (labelled, bounded), refusing a transaction
pooler, the one-runner-at-a-time advisory lock and the migration tool's own (naming their
holder), and the session's backstop timeouts.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from pgsteady.errors import CannotConnect, MigrationBlocked, UsageError
from pgsteady.migrate import preflight, queries
from pgsteady.migrate.policy import Policy, first_line
from pgsteady.settings import (
    connect_timeout_kwargs,
    pg_interval,
    redact,
    refuse_admin_console,
)
from pgsteady.tools import registry

if TYPE_CHECKING:  # the analysis (pglast's trees) is imported when a statement needs it
    pass

log = logging.getLogger("pgsteady.migrate")

POLL_RUNNER_LOCK = 0.1


def application_name() -> str:
    """The session label every migration connection carries: ``pgsteady-migrate@host:pid``."""
    return f"pgsteady-migrate@{socket.gethostname()}:{os.getpid()}"[:63]


def connect(dsn: str, *, connect_timeout: int = 10) -> psycopg.Connection[Any]:
    """An autocommit connection labelled ``pgsteady-migrate@host:pid``; CannotConnect if not.

    ``connect_timeout`` is only a default: one in the DSN (key or URL query) or in
    ``PGCONNECT_TIMEOUT`` wins, as libpq users expect.
    """
    try:
        conn = psycopg.connect(dsn, autocommit=True, application_name=application_name(),
                               prepare_threshold=None,
                               **connect_timeout_kwargs(dsn, connect_timeout))
    except psycopg.OperationalError as exc:
        raise CannotConnect(f"cannot connect to {redact(dsn) or 'the default database'}: "
                            f"{first_line(exc)}") from exc
    refuse_admin_console(conn)
    return conn


class EarlyConnection:
    """:func:`connect` begun in a thread while the caller loads and checks the folder.

    Opening a session is mostly waiting (the server starts a backend, authenticates and loads
    its caches: 5-8 ms on loopback, more across a network) and loading 300 files is mostly
    Python; doing both at once takes the wait off every run. :meth:`take` gives the
    connection or raises what connecting raised; :meth:`discard` closes it unused (the folder
    was refused). The wait is bounded by the connect timeout."""

    def __init__(self, dsn: str) -> None:
        self._conn: psycopg.Connection[Any] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._connect, args=(dsn,), daemon=True,
                                        name="pgsteady-connect")
        self._thread.start()

    def _connect(self, dsn: str) -> None:
        try:
            self._conn = connect(dsn)
        except BaseException as exc:  # handed to take()'s caller
            self._error = exc

    def take(self) -> psycopg.Connection[Any]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._conn is not None
        return self._conn

    def discard(self) -> None:
        self._thread.join()
        if self._conn is not None:
            self._conn.close()


def refuse_transaction_pooler(conn: psycopg.Connection[Any], dsn: str) -> None:
    """UsageError if ``conn`` goes through a pooler that shares server connections between
    clients (PgBouncer transaction or statement mode): migrate's session settings would leak
    to other clients and its runner lock would stay on a pooled server connection.

    Direct connections are recognised by the server's port being the one we dialled; through
    anything else, a second client connection that lands on our backend proves the sharing
    (an idle server connection is handed to the next client, last used first).
    """
    row = conn.execute(queries.BACKEND_AND_PORT).fetchone()
    if row is None:
        return
    pid, server_port = row
    dialled = conn.info.port
    if server_port is None or server_port == dialled:
        return
    with connect(dsn) as other:
        for _ in range(3):
            seen = other.execute(queries.BACKEND_AND_PORT).fetchone()
            again = conn.execute(queries.BACKEND_AND_PORT).fetchone()
            if (seen is not None and seen[0] == pid) or (again is not None and again[0] != pid):
                raise UsageError(
                    f"{redact(dsn) or 'the database'} is reached through a transaction pooler "
                    f"(server connections are shared between clients): migrate's settings "
                    f"and its runner lock would leak to other clients. Connect directly to "
                    f"PostgreSQL or through a session-mode pool")


@dataclass(frozen=True)
class ToolLock:
    """An advisory lock a migration tool takes while it migrates (one-bigint ``key``), and
    the tool's name as people write it (``owner``)."""

    key: int
    owner: str


def tool_locks(conn: psycopg.Connection[Any], tool: str, schema: str,
               table: str) -> list[ToolLock]:
    """The locks ``tool``'s own runner takes on this database for its history at
    ``schema.table`` (:meth:`~pgsteady.tools.registry.Tool.advisory_locks`)."""
    kept = registry.get(tool)
    row = conn.execute(queries.DATABASE_AND_SCHEMA).fetchone()
    database, current = (row[0], row[1] or schema) if row is not None else ("", schema)
    place = registry.LockPlace(database, current, schema, table)
    keys = dict.fromkeys(k for k in kept.advisory_locks(place) if k != queries.RUNNER_LOCK_KEY)
    return [ToolLock(key, kept.display) for key in keys]


@contextmanager
def runner_lock(conn: psycopg.Connection[Any], wait: float,
                tool: Sequence[ToolLock] = ()) -> Iterator[None]:
    """Hold the one-runner-at-a-time advisory lock, then those the migrations' own tool
    takes (``tool``: so ``prisma migrate deploy`` or golang-migrate and pgsteady never run
    at once on one database); wait at most ``wait`` seconds for all of them together."""
    deadline = time.monotonic() + wait
    held: list[int] = []
    try:
        _take_lock(conn, queries.RUNNER_LOCK_KEY, deadline, wait, None)
        held.append(queries.RUNNER_LOCK_KEY)
        for lock in tool:
            _take_lock(conn, lock.key, deadline, wait, lock)
            held.append(lock.key)
        yield
    finally:
        for key in reversed(held):
            try:
                if not conn.closed:
                    conn.execute(queries.RELEASE_RUNNER_LOCK, {"key": key})
            except psycopg.Error:  # a lost session has released it already; keep the error
                log.debug("could not release advisory lock %d", key, exc_info=True)


def _take_lock(conn: psycopg.Connection[Any], key: int, deadline: float, wait: float,
               lock: ToolLock | None) -> None:
    """Take the session advisory lock ``key`` by the ``deadline``; MigrationBlocked naming
    its holder if not (``lock``: the tool's lock it is, None: pgsteady's own)."""
    params = {"key": key}
    while True:
        row = conn.execute(queries.TRY_RUNNER_LOCK, params).fetchone()
        if row is not None and row[0]:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            holder = _lock_holder(conn, key)
            whose = "" if lock is None else \
                f" (it holds {lock.owner}'s migration lock, advisory lock {key})"
            raise MigrationBlocked(
                f"another migration runner is active: {holder}{whose}; waited {wait:g}s for "
                f"it. Let it finish and run again (or raise the wait)")
        time.sleep(min(POLL_RUNNER_LOCK, left))


def _lock_holder(conn: psycopg.Connection[Any], key: int) -> str:
    from psycopg.rows import dict_row  # noqa: PLC0415 - only on this path

    # pg_locks shows a one-bigint key as classid (high half) and objid (low half), objsubid 1
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(queries.RUNNER_LOCK_HOLDER, {
            "hi": (key >> 32) & 0xFFFFFFFF, "lo": key & 0xFFFFFFFF,
            "query_chars": preflight.QUERY_CHARS}).fetchone()
    if row is None:
        return "its holder ended meanwhile"
    return preflight._session(row).describe()


def execute_text(conn: psycopg.Connection[Any], text: str) -> None:
    # Migration text is the user's own SQL, sent as is, without parameters.
    conn.execute(text)  # type: ignore[arg-type,unused-ignore]  # not a LiteralString, by design


def backstop(conn: psycopg.Connection[Any], policy: Policy) -> None:
    """Session-wide timeouts, so pgsteady's own catalog reads can never hang either."""
    set_setting(conn, "lock_timeout", policy.lock_timeout, local=False)
    set_setting(conn, "statement_timeout", policy.statement_timeout, local=False)


def set_setting(conn: psycopg.Connection[Any], name: str, seconds: float, *, local: bool) -> None:
    query = queries.SET_LOCAL if local else queries.SET_SESSION
    conn.execute(query, {"name": name, "value": pg_interval(seconds)})

