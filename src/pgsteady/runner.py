"""``Database``: deadline-safe queries over a psycopg_pool ``ConnectionPool`` (threads).

The caller's deadline ends the caller's wait, never the query. Each call becomes a job that
one of ``pool_size`` worker threads runs on a connection it owns until the query is done, so
a deadline can never close a connection under a query — the move that makes PgBouncer destroy
server connections and drain its pool (docs/outages.md). A job whose caller gave up before it
started is dropped without touching the database; the backlog is bounded (``Overloaded``).

A one-statement call that finds a worker idle with a connection skips the hand-off: it
borrows that connection and runs on its own thread, and the worker finishes the statement only
if the caller leaves first (:mod:`pgsteady._direct`).

The rules live in :mod:`pgsteady._core`; this module and :mod:`pgsteady.arunner` only move
jobs between callers, workers and the pool, each in its own concurrency model.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.abc import Params, Query
from psycopg_pool import ConnectionPool, PoolTimeout

from pgsteady import _checks, _core, _cursors, _direct, _fork, _outcome, _poollog, _setup
from pgsteady._core import DEFAULT, Core, DatabaseStats, Job
from pgsteady.errors import CannotConnect, UsageError
from pgsteady.guards.breaker import CircuitBreaker
from pgsteady.settings import Duration, redact, to_seconds

__all__ = ["DEFAULT", "Database", "DatabaseStats"]  # DEFAULT lives in _core, shown here too

log = logging.getLogger("pgsteady.runner")

T = TypeVar("T")
# How often a caller waiting for a connection looks whether the pooler refused pooler="direct".
_REFUSAL_CHECK = 0.2


@dataclass(eq=False, slots=True)
class _Slot:
    """A worker, the connection it holds between jobs, and who is using that connection."""

    wake: threading.Event
    conn: psycopg.Connection[Any] | None = None
    turns: int = 0
    lent: bool = False  # a caller runs a statement on ``conn`` in its own thread
    left: tuple[Any, Job] | None = None  # (generator, job) its caller left: finish it

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
    ``None`` (or infinity) means no limit. Two zeros differ, as they do in PostgreSQL:
    ``deadline=0`` leaves the caller no time at all (the call fails at once with
    ``DeadlineExceeded`` and nothing is sent), while ``statement_timeout=0`` (like
    ``lock_timeout`` and ``idle_in_transaction_timeout``) is PostgreSQL's "no limit".

    Arguments are checked here, before anything is queued or connected: a malformed
    ``conninfo``, a wrong type or an impossible duration is a ``UsageError``. With
    ``pooler="direct"``, a pool taking more than half of the server's connection slots is
    logged as a warning on its first connection. With ``pooler="transaction"``, statements
    that cannot run inside a transaction block (``VACUUM``, ``CREATE INDEX CONCURRENTLY``)
    raise ``UsageError``: run them through a direct ``Database``. PostgreSQL's errors reach
    the caller unchanged, DETAIL included (``exc.diag.message_detail``).
    """

    def __init__(
        self, conninfo: str, *, pool_size: int = 4, max_waiting: int | None = None,
        service: str = "pgsteady", statement_timeout: Duration = 30.0,
        lock_timeout: Duration = 5.0, idle_in_transaction_timeout: Duration = 60.0,
        pooler: str = "direct", deadline: Duration = None, connect_timeout: Duration = 10.0,
        open: bool = True, pool_kwargs: dict[str, Any] | None = None,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        _setup.check_conninfo(conninfo)
        _checks.breaker(breaker)
        _poollog.install()  # psycopg_pool's warnings: one per kind per 10 s, not a flood
        setup = _setup.Setup.of(
            pool_size=pool_size, max_waiting=max_waiting, service=service, pooler=pooler,
            statement_timeout=statement_timeout, lock_timeout=lock_timeout,
            idle_in_transaction_timeout=idle_in_transaction_timeout, deadline=deadline,
            connect_timeout=connect_timeout)
        self.settings = setup.settings
        self.default_deadline = setup.default_deadline
        self._connect_timeout = setup.connect_timeout
        self._core = Core(pool_size, setup.max_waiting)
        self._lock = threading.Lock()
        # Idle workers, each waiting on its own Event; those holding a connection are woken
        # first, so a job never waits for a connection while another worker holds one idle.
        self._idle_holding: list[_Slot] = []
        self._idle_empty: list[_Slot] = []
        self._slots: list[_Slot] = []
        kwargs = dict(pool_kwargs or {})
        self._direct = _direct.ENABLED
        if self._direct:
            kwargs["connection_class"] = _direct.driven(
                kwargs.get("connection_class", psycopg.Connection))
        # A pooler refusing pooler="direct"'s startup options, noted at connect: callers
        # waiting for a connection then fail at once with the fix, not at their deadline.
        self._refused: list[str] = []
        kwargs["connection_class"] = _outcome.watching(_fork.fork_safe(
            kwargs.get("connection_class", psycopg.Connection)), self._refused, pooler)
        self._prefix = setup.prefix
        self._set_query = setup.set_query
        self._check_slots = pooler == "direct"
        # Every connection passes _configure, which also lists it for _fork.
        self._make_pool = functools.partial(
            ConnectionPool, conninfo, **setup.pool_args(),
            configure=self._configure, **kwargs)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = self._make_pool()
        self._workers: list[threading.Thread] = []
        self._forked = False  # a child's copy, to start its own pool and workers on first use
        self.conninfo = redact(conninfo)
        self.breaker = breaker
        _fork.track(self)
        if open:
            self.open()

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Start connecting (in the background) and start the workers."""
        self._core.opened = True
        self._start()

    def _start(self) -> None:
        self._pool.open(wait=False)
        self._workers = [
            threading.Thread(target=self._worker, name=f"pgsteady-{self.settings.service}-{i}",
                             daemon=True)
            for i in range(self._core.pool_size)
        ]
        for worker in self._workers:
            worker.start()

    def _after_fork(self) -> None:
        """In a forked child (see :mod:`pgsteady._fork`): forget the parent's pool, workers,
        lock and counts without calling into them; the first call here starts new ones."""
        _fork.keep(self._pool, self._slots, self._workers, self._lock, self._core)
        core = self._core = self._core.fresh()
        self._lock = threading.Lock()
        self._idle_holding, self._idle_empty, self._slots, self._workers = [], [], [], []
        self.settings = self.settings.for_this_process()  # labelled with the child's pid
        self._make_pool = functools.partial(self._make_pool, kwargs={
            **self._make_pool.keywords["kwargs"], **self.settings.connect_kwargs()})
        self._pool = self._make_pool()
        self._forked = core.opened and not core.closed
        if self.breaker is not None:
            self.breaker.after_fork()

    def _restart(self) -> None:
        """The first call in a forked child starts the child's own pool and workers."""
        with self._lock:
            start, self._forked = self._forked, False
        if start:
            self._start()

    def wait(self, timeout: Duration = 30.0) -> None:
        """Block until the pool has opened all its connections, or raise
        :class:`CannotConnect`; the Database stays usable and keeps trying either way.
        (psycopg_pool's own ``wait`` closes the pool when it times out.)"""
        seconds = to_seconds(timeout, "timeout") or 30.0
        if self._forked:
            self._restart()
        deadline = time.monotonic() + seconds
        while self._open_connections() < self._core.pool_size:
            if self._refused:  # it never will: the pooler refuses pooler="direct"
                raise UsageError(self._refused[0])
            if time.monotonic() >= deadline:
                raise CannotConnect(
                    f"the pool could not open {self._core.pool_size} connections to "
                    f"{self.conninfo} within {seconds:g} s; it keeps trying in the background")
            time.sleep(0.01)

    def _open_connections(self) -> int:
        with self._lock:
            held = self._core.held
        return held + self._pool.get_stats().get("pool_available", 0)

    def close(self, timeout: float = 10.0) -> None:
        """Refuse new jobs, fail the queued ones, let running queries finish, close the pool."""
        with self._lock:
            for job in self._core.close():
                job.waker.release()
            for slot in self._slots:
                slot.wake.set()
        deadline = time.monotonic() + timeout
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        self._pool.close(max(0.1, deadline - time.monotonic()))

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        _fork.remember(conn)
        with self._lock:  # the pool configures connections from several threads
            check, self._check_slots = self._check_slots, False
        if check:
            try:
                row = conn.execute(_setup.SLOTS_QUERY).fetchone()
            except psycopg.Error as exc:  # a check, never a reason to refuse a connection
                log.debug("could not read the server's connection slots: %s", exc)
                conn.rollback()
            else:
                if row is not None:
                    _setup.warn_if_pool_too_big(self._core.pool_size, *row)
        if self.settings.pooler == "session":
            conn.execute(*self._set_query)

    # -- calls -------------------------------------------------------------------------------

    def fetchone(self, query: Query, params: Params | None = None, *,
                 deadline: Duration = DEFAULT) -> Any:
        """The first row of one statement, or None."""
        return self._call(self._statement(query, params, _one), deadline, single=True)

    def fetchall(self, query: Query, params: Params | None = None, *,
                 deadline: Duration = DEFAULT) -> list[Any]:
        """Every row of one statement."""
        rows: list[Any] = self._call(self._statement(query, params, _all), deadline,
                                     single=True)
        return rows

    def execute(self, query: Query, params: Params | None = None, *,
                deadline: Duration = DEFAULT) -> int:
        """Run one statement; return its row count."""
        count: int = self._call(self._statement(query, params, _rowcount), deadline,
                                single=True)
        return count

    def run(self, fn: Callable[[psycopg.Connection[Any]], T], *,
            deadline: Duration = DEFAULT) -> T:
        """Run ``fn(conn)`` in one transaction on a worker; return what it returns.

        If the deadline passes, ``fn`` still runs to its end and commits (or rolls back on an
        exception); only the caller stops waiting. If the connection breaks, the error says
        whether COMMIT had been sent: before, ``QueryFailed`` (rolled back, safe to retry);
        during, ``OutcomeUnknown`` (it may have committed).
        """
        _checks.job_function(fn, "Database", wants_async=False)
        local = self._set_query if self.settings.pooler == "transaction" else None

        def work(conn: psycopg.Connection[Any], job: Job) -> T:
            with conn.transaction():
                if local is not None:
                    conn.execute(*local)
                result = fn(conn)
                job.commit_sent = _core.will_commit(conn)  # leaving the block sends COMMIT
            _core.check_committed(conn)
            return result

        result: T = self._call(work, deadline)
        return result

    def stats(self) -> DatabaseStats:
        with self._lock:
            return self._core.snapshot()

    # -- moving jobs -------------------------------------------------------------------------

    def _statement(self, query: Query, params: Params | None,
                   fetch: Callable[[psycopg.Cursor[Any]], Any]) -> Callable[[Any, Job], Any]:
        _setup.check_statement(query, params, bytes_ok=not self._prefix)
        if not self._prefix:
            def plain(conn: psycopg.Connection[Any], job: Job) -> Any:
                job.commit_sent = not conn.closed  # autocommit: the statement commits itself
                cur = _cursors.take(conn)
                result = fetch(cur.execute(query, params))
                _cursors.put_back(conn, cur, params)
                return result
            return plain
        prefixed = sql.Composed([sql.SQL(self._prefix), sql.SQL(query) if isinstance(query, str)
                                 else query])

        def work(conn: psycopg.Connection[Any], job: Job) -> Any:
            cur = psycopg.ClientCursor(conn)
            job.commit_sent = not conn.closed  # one implicit transaction, committed at its end
            try:
                cur.execute(prefixed, params)
            except psycopg.errors.ActiveSqlTransaction as exc:
                raise _setup.not_in_transaction_mode(exc) from exc
            cur.nextset()
            return fetch(cur)

        return work

    def _call(self, work: Callable[[Any, Job], Any], deadline: Duration,
              single: bool = False) -> Any:
        if self.breaker is None:
            return self._unguarded(work, deadline, single)
        return _core.guard(self.breaker, lambda: self._unguarded(work, deadline, single))

    def _unguarded(self, work: Callable[[Any, Job], Any], deadline: Duration,
                   single: bool) -> Any:
        """Run ``work`` and wait for it until the deadline. ``single``: it sends one
        statement, so its caller may run it on a borrowed connection (``_direct``)."""
        if self._forked:
            self._restart()
        job = _core.new_job(work, deadline, self.default_deadline)
        borrow = single and self._direct and (job.budget is None or job.budget > 0)
        with self._lock:  # one look: borrow an idle connection, else queue for a worker
            slot = self._core.lend(self._idle_holding, job) if borrow else None
            if slot is None:
                job.waker = threading.Lock()
                job.waker.acquire()
                self._core.admit(job)
                for idle in (self._idle_holding, self._idle_empty):
                    if idle:
                        idle.pop().wake.set()
                        break
        if slot is not None:
            return self._drive(slot, job)
        return _core.wait_for_outcome_in_thread(self._core, job, self._lock)

    # -- a caller on a borrowed connection (see _direct) -------------------------------------

    def _drive(self, slot: _Slot, job: Job) -> Any:
        conn = slot.conn
        drive = _direct.Drive(job.deadline,
                              lambda gen, interrupted: self._leave(slot, job, gen, interrupted))
        try:
            assert isinstance(conn, _direct.DrivenConnection)
            conn.pgsteady_drive = drive
            result = job.work(conn, job)
        except _direct.Left as left:  # the deadline passed; the worker finishes the statement
            raise left.error from None
        except BaseException as exc:
            error = _core.direct_failure(exc, drive.handed, job, broken=conn is None or conn.closed)
            if error is None:  # the worker has the statement
                raise
            self._return(slot, job, None, error)
            if error is exc or not isinstance(exc, Exception):
                raise
            raise error from exc
        self._return(slot, job, result, None)
        return result

    def _return(self, slot: _Slot, job: Job, result: Any, error: BaseException | None) -> None:
        """The caller's statement ended: the worker gets its connection back, and wakes only
        if there is something to do (a queued job, closing, a connection to retire)."""
        assert isinstance(slot.conn, _direct.DrivenConnection)
        slot.conn.pgsteady_drive = None
        with self._lock:
            if self._core.returned(slot, job, result, error):
                slot.wake.set()
            else:
                self._idle_holding.append(slot)

    def _leave(self, slot: _Slot, job: Job, gen: Any, interrupted: bool) -> BaseException:
        """The caller leaves mid-statement (its deadline passed, or ``interrupted``): its
        worker drives the statement to its end."""
        with self._lock:
            slot.left = (gen, job)
            error = self._core.give_up(job, time.monotonic(), interrupted)
            slot.wake.set()
        assert error is not None  # a started job ends only by the worker, after this
        return error

    def _finish_left(self, slot: _Slot, gen: Any, job: Job) -> None:
        assert slot.conn is not None
        error = None
        try:
            _direct.finish(slot.conn, gen)
        except BaseException as exc:  # recorded; a worker must not die silently
            error = _core.wrap_error(exc, job, broken=slot.conn.closed)
            if not isinstance(exc, Exception):
                raise
        finally:
            with self._lock:
                self._core.finish(job, None, error)
                slot.lent = False
                slot.turns += 1

    # -- workers -----------------------------------------------------------------------------

    def _worker(self) -> None:
        """Take jobs; run each on a connection held between jobs while work keeps coming
        (a pool round trip per job would cost more than the runner itself). While a caller
        has the connection (``_direct``), wait for it back, or for the statement it left."""
        slot = _Slot(threading.Event())
        with self._lock:
            self._slots.append(slot)
        try:
            while True:
                job, left, retire = None, None, False
                with self._lock:
                    left, slot.left = slot.left, None
                    if left is None and slot.lent:
                        slot.wake.clear()
                    elif left is None:
                        # A caller that just gave the connection back listed the slot idle:
                        # never list it twice (one connection for two users).
                        for idle in (self._idle_holding, self._idle_empty):
                            if slot in idle:
                                idle.remove(slot)
                        retire = slot.conn is not None and (
                            not _direct.ready(slot.conn)
                            or slot.turns >= _core.KEEP_CONNECTION_FOR)
                        job = None if retire else self._core.take()
                        if job is None and not retire:
                            if self._core.closed:
                                return
                            slot.wake.clear()
                            (self._idle_holding if slot.conn else self._idle_empty).append(slot)
                if left is not None:
                    self._finish_left(slot, *left)
                elif retire:
                    self._give_back(slot)
                elif job is None:
                    self._park(slot)
                elif slot.conn is not None or self._connection_for(slot, job):
                    assert slot.conn is not None
                    self._run(job, slot.conn)
                    slot.turns += 1
        finally:
            if slot.conn is not None and not slot.lent:
                self._give_back(slot)

    def _park(self, slot: _Slot) -> None:
        """Wait for a job (or, lent, for the connection back); give the connection back to
        the pool after a quiet while, to let the pool look after it."""
        woken = slot.wake.wait(_core.HOLD_IDLE if slot.conn else _core.IDLE_POLL)
        with self._lock:
            for idle in (self._idle_holding, self._idle_empty):
                if slot in idle:
                    idle.remove(slot)
            quiet = not woken and not self._core.waiting and not slot.lent
        if quiet and slot.conn is not None:
            self._give_back(slot)

    def _give_back(self, slot: _Slot) -> None:
        conn = slot.conn
        assert conn is not None
        _direct.settle(conn)  # never back to the pool mid-statement or mid-transaction
        with self._lock:
            self._core.held -= 1
            slot.conn, slot.turns = None, 0
        self._pool.putconn(conn)

    def _getconn(self, wait: float) -> psycopg.Connection[Any]:
        """A connection from the pool within ``wait``; with pooler="direct", looked for in
        short slices, so that a pooler's refusal of the startup options ends the wait."""
        if not self._check_slots:
            return self._pool.getconn(timeout=wait)
        end = time.monotonic() + wait
        while not self._refused:
            try:
                return self._pool.getconn(timeout=min(_REFUSAL_CHECK, wait))
            except PoolTimeout:
                wait = end - time.monotonic()
                if wait <= 0:
                    raise
        raise UsageError(self._refused[0])

    def _connection_for(self, slot: _Slot, job: Job) -> bool:
        """Get ``slot`` a connection for ``job``; False (the job ended) if none came."""
        remaining = job.remaining(time.monotonic())
        wait = self._connect_timeout if remaining is None else max(remaining, 0.001)
        try:
            conn = self._getconn(wait)
        except Exception as exc:  # PoolTimeout, PoolClosed, or anything else: never hang
            error = UsageError(self._refused[0]) if self._refused else \
                _core.no_connection_error(exc, wait)
            with self._lock:
                self._core.no_connection(job, error)
            job.waker.release()
            return False
        with self._lock:
            self._core.held += 1
            slot.conn = conn
        return True

    def _run(self, job: Job, conn: psycopg.Connection[Any]) -> None:
        """Run ``job`` to its end on ``conn`` — the deadline does not interrupt it."""
        with self._lock:
            started = self._core.begin(job, time.monotonic())
        if not started:
            job.waker.release()
            return
        result, error = None, None
        try:
            result = job.work(conn, job)
        except BaseException as exc:  # recorded for the caller; a worker must not die silently
            error = _core.wrap_error(exc, job, broken=conn.closed)
            if not isinstance(exc, Exception):
                raise
        finally:
            with self._lock:
                self._core.finish(job, result, error)
            job.waker.release()
