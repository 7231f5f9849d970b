"""``Database``: deadline-safe queries over a psycopg_pool ``ConnectionPool`` (threads).

The caller's deadline ends the caller's wait, never the query. Each call becomes a job that
one of ``pool_size`` worker threads runs on a connection it owns until the query is done, so
a deadline can never close a connection under a query — the move that makes PgBouncer destroy
server connections and drain its pool (seed 000). A job whose caller gave up before it
started is dropped without touching the database; the backlog is bounded (``Overloaded``).

The rules live in :mod:`pgsteady._core`; this module and :mod:`pgsteady.arunner` only move
jobs between callers, workers and the pool, each in its own concurrency model.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.abc import Params, Query
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from pgsteady import _core
from pgsteady._core import Core, DatabaseStats, Job
from pgsteady.errors import CannotConnect
from pgsteady.settings import Duration, SessionSettings, redact, to_seconds

log = logging.getLogger("pgsteady.runner")

T = TypeVar("T")


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Any = _Default()
"""Use the Database's default deadline."""

_IDLE_POLL = 1.0  # workers re-check for shutdown at least this often


def _one(cur: psycopg.Cursor[Any]) -> Any:
    return cur.fetchone()


def _all(cur: psycopg.Cursor[Any]) -> Any:
    return cur.fetchall()


def _rowcount(cur: psycopg.Cursor[Any]) -> Any:
    return cur.rowcount


class Database:
    """A pool of ``pool_size`` connections and as many workers; every call takes a deadline.

    ``pooler`` says what sits between us and PostgreSQL — ``"direct"``, PgBouncer in
    ``"session"`` or ``"transaction"`` mode — and decides how the session settings travel
    (see :class:`~pgsteady.settings.SessionSettings`). Durations are seconds or ``timedelta``;
    ``None`` means no limit.
    """

    def __init__(
        self, conninfo: str, *, pool_size: int = 4, max_waiting: int | None = None,
        service: str = "pgsteady", statement_timeout: Duration = 30.0,
        lock_timeout: Duration = 5.0, idle_in_transaction_timeout: Duration = 60.0,
        pooler: str = "direct", deadline: Duration = None, connect_timeout: Duration = 10.0,
        open: bool = True, pool_kwargs: dict[str, Any] | None = None,
    ) -> None:
        max_waiting = _core.check_sizes(pool_size, max_waiting)
        self.settings = SessionSettings(
            service=service, pooler=pooler,
            statement_timeout=to_seconds(statement_timeout, "statement_timeout"),
            lock_timeout=to_seconds(lock_timeout, "lock_timeout"),
            idle_in_transaction_timeout=to_seconds(idle_in_transaction_timeout,
                                                   "idle_in_transaction_timeout"))
        self.default_deadline = to_seconds(deadline, "deadline")
        self._connect_timeout = to_seconds(connect_timeout, "connect_timeout") or 10.0
        self._core = Core(pool_size, max_waiting)
        self._lock = threading.Lock()
        self._work_ready = threading.Condition(self._lock)
        self._prefix = (_core.transaction_prefix(self.settings)
                        if pooler == "transaction" else "")
        self._set_query = self.settings.set_query()
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            conninfo, min_size=pool_size, max_size=pool_size, open=False, name=service,
            timeout=self._connect_timeout,
            kwargs={"autocommit": True, "connect_timeout": max(2, round(self._connect_timeout)),
                    **self.settings.connect_kwargs()},
            configure=self._configure if pooler == "session" else None,
            **(pool_kwargs or {}))
        self._workers: list[threading.Thread] = []
        self.conninfo = redact(conninfo)
        if open:
            self.open()

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Start connecting (in the background) and start the workers."""
        self._pool.open(wait=False)
        self._workers = [
            threading.Thread(target=self._worker, name=f"pgsteady-{self.settings.service}-{i}",
                             daemon=True)
            for i in range(self._core.pool_size)
        ]
        for worker in self._workers:
            worker.start()

    def wait(self, timeout: Duration = 30.0) -> None:
        """Block until every connection of the pool is open, or raise :class:`CannotConnect`."""
        seconds = to_seconds(timeout, "timeout") or 30.0
        try:
            self._pool.wait(timeout=seconds)
        except PoolTimeout as exc:
            raise CannotConnect(f"the pool could not open {self._core.pool_size} connections "
                                f"to {self.conninfo} within {seconds:.0f} s") from exc

    def close(self, timeout: float = 10.0) -> None:
        """Refuse new jobs, fail the queued ones, let running queries finish, close the pool."""
        with self._work_ready:
            for job in self._core.close():
                job.waker.release()
            self._work_ready.notify_all()
        for worker in self._workers:
            worker.join(timeout)
        self._pool.close(timeout)

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(*self._set_query)

    # -- calls -------------------------------------------------------------------------------

    def fetchone(self, query: Query, params: Params | None = None, *,
                 deadline: Duration = DEFAULT) -> Any:
        """The first row of one statement, or None."""
        return self._call(self._statement(query, params, _one), deadline)

    def fetchall(self, query: Query, params: Params | None = None, *,
                 deadline: Duration = DEFAULT) -> list[Any]:
        """Every row of one statement."""
        rows: list[Any] = self._call(self._statement(query, params, _all), deadline)
        return rows

    def execute(self, query: Query, params: Params | None = None, *,
                deadline: Duration = DEFAULT) -> int:
        """Run one statement; return its row count."""
        count: int = self._call(self._statement(query, params, _rowcount), deadline)
        return count

    def run(self, fn: Callable[[psycopg.Connection[Any]], T], *,
            deadline: Duration = DEFAULT) -> T:
        """Run ``fn(conn)`` in one transaction on a worker; return what it returns.

        If the deadline passes, ``fn`` still runs to its end and commits (or rolls back on an
        exception); only the caller stops waiting.
        """
        local = self._set_query if self.settings.pooler == "transaction" else None

        def work(conn: psycopg.Connection[Any]) -> T:
            with conn.transaction():
                if local is not None:
                    conn.execute(*local)
                return fn(conn)

        result: T = self._call(work, deadline)
        return result

    def stats(self) -> DatabaseStats:
        pool = self._pool.get_stats()
        in_use = pool.get("pool_size", 0) - pool.get("pool_available", 0)
        with self._lock:
            return self._core.snapshot(in_use)

    # -- moving jobs -------------------------------------------------------------------------

    def _statement(self, query: Query, params: Params | None,
                   fetch: Callable[[psycopg.Cursor[Any]], Any]) -> Callable[[Any], Any]:
        if not self._prefix:
            return lambda conn: fetch(conn.execute(query, params))
        prefixed = sql.Composed([sql.SQL(self._prefix), sql.SQL(query) if isinstance(query, str)
                                 else query])

        def work(conn: psycopg.Connection[Any]) -> Any:
            cur = psycopg.ClientCursor(conn)
            cur.execute(prefixed, params)
            cur.nextset()
            return fetch(cur)

        return work

    def _call(self, work: Callable[[Any], Any], deadline: Duration) -> Any:
        budget = self.default_deadline if deadline is DEFAULT else to_seconds(deadline,
                                                                               "deadline")
        now = time.monotonic()
        job = Job(work, budget, now, None if budget is None else now + budget)
        job.waker = threading.Lock()
        job.waker.acquire()
        with self._work_ready:
            self._core.admit(job)
            self._work_ready.notify()
        if job.waker.acquire(timeout=-1 if budget is None else budget):
            with self._lock:
                return self._core.outcome(job, time.monotonic())
        with self._lock:
            error = self._core.give_up(job, time.monotonic())
            if error is None:
                return self._core.outcome(job, time.monotonic())
        raise error

    def _worker(self) -> None:
        """Take jobs; run each on a connection held between jobs while work keeps coming
        (a pool round trip per job would cost more than the runner itself)."""
        conn: psycopg.Connection[Any] | None = None
        turns = 0
        try:
            while True:
                with self._work_ready:
                    if not self._core.waiting and not self._core.closed:
                        self._work_ready.wait(_core.HOLD_IDLE if conn else _IDLE_POLL)
                    job = self._core.take()
                    closed = self._core.closed
                if job is None:
                    if closed:
                        return
                    if conn is not None:  # quiet: let the pool look after the connection
                        self._pool.putconn(conn)
                        conn, turns = None, 0
                    continue
                if conn is None:
                    conn = self._connection_for(job)
                    if conn is None:
                        continue
                self._run(job, conn)
                turns += 1
                if conn.closed or turns >= _core.KEEP_CONNECTION_FOR:
                    self._pool.putconn(conn)
                    conn, turns = None, 0
        finally:
            if conn is not None:
                self._pool.putconn(conn)

    def _connection_for(self, job: Job) -> psycopg.Connection[Any] | None:
        remaining = job.remaining(time.monotonic())
        wait = self._connect_timeout if remaining is None else max(remaining, 0.001)
        try:
            return self._pool.getconn(timeout=wait)
        except (PoolTimeout, PoolClosed) as exc:
            with self._lock:
                self._core.no_connection(job, _core.no_connection_error(exc, wait))
            job.waker.release()
            return None

    def _run(self, job: Job, conn: psycopg.Connection[Any]) -> None:
        """Run ``job`` to its end on ``conn`` — the deadline does not interrupt it."""
        with self._lock:
            started = self._core.begin(job, time.monotonic())
        if started:
            result, error = None, None
            try:
                result = job.work(conn)
            except Exception as exc:
                error = _core.wrap_error(exc)
            with self._lock:
                self._core.finish(job, result, error)
        job.waker.release()
