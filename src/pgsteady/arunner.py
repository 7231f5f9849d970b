"""``AsyncDatabase``: :class:`~pgsteady.runner.Database` for asyncio, over
``AsyncConnectionPool``. Same API, same rules (they live in :mod:`pgsteady._core`).

Workers are ``pool_size`` tasks; a caller waits on a future with a timer, so giving up costs
no task and no cancellation reaches the query. Cancelling the caller's own task (say, by an
``asyncio.timeout`` around the call) counts as giving up too: the query is left to finish.
A one-statement call that finds a worker idle with a connection runs on the caller's own task
instead, and hands its statement to that worker if it leaves (:mod:`pgsteady._direct`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.abc import Params, Query
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from pgsteady import _checks, _core, _cursors, _direct, _fork, _outcome, _poollog, _setup
from pgsteady._core import DEFAULT, Core, DatabaseStats, Job, wait_for_outcome
from pgsteady.errors import CannotConnect, UsageError
from pgsteady.guards.breaker import CircuitBreaker
from pgsteady.settings import Duration, redact, to_seconds

log = logging.getLogger("pgsteady.runner")


T = TypeVar("T")
_REFUSAL_CHECK = 0.2  # as Database's: how often a waiting caller looks for a refusal
AsyncWork = Callable[[psycopg.AsyncConnection[Any], Job], Awaitable[Any]]


@dataclass(eq=False)
class _Slot:
    """A worker task, the connection it holds between jobs, and who is using it: the
    asyncio form of ``runner._Slot`` (one event loop: no lock)."""

    wake: asyncio.Future[bool] | None = None  # what the parked worker waits on
    conn: psycopg.AsyncConnection[Any] | None = None
    turns: int = 0
    lent: bool = False  # a caller runs a statement on ``conn`` in its own task
    left: tuple[Any, Job] | None = None  # (generator, job) its caller left: finish it


def _one(cur: psycopg.AsyncCursor[Any]) -> Awaitable[Any]:
    return cur.fetchone()  # the awaitable itself: one coroutine frame fewer per call


def _all(cur: psycopg.AsyncCursor[Any]) -> Awaitable[Any]:
    return cur.fetchall()


async def _rowcount(cur: psycopg.AsyncCursor[Any]) -> Any:
    return cur.rowcount


class AsyncDatabase:
    """The asyncio twin of :class:`~pgsteady.runner.Database`; call ``await open()`` first
    (or use ``async with``)."""

    def __init__(
        self, conninfo: str, *, pool_size: int = 4, max_waiting: int | None = None,
        service: str = "pgsteady", statement_timeout: Duration = 30.0,
        lock_timeout: Duration = 5.0, idle_in_transaction_timeout: Duration = 60.0,
        pooler: str = "direct", deadline: Duration = None, connect_timeout: Duration = 10.0,
        pool_kwargs: dict[str, Any] | None = None, breaker: CircuitBreaker | None = None,
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
        self._prefix = setup.prefix
        self._set_query = setup.set_query
        self._check_slots = pooler == "direct"
        # A pooler refusing pooler="direct"'s startup options, noted at connect (see Database).
        self._refused: list[str] = []
        kwargs = dict(pool_kwargs or {})
        self._direct = _direct.ENABLED
        if self._direct:
            kwargs["connection_class"] = _direct.adriven(
                kwargs.get("connection_class", psycopg.AsyncConnection))
        kwargs["connection_class"] = _outcome.watching(_fork.fork_safe(
            kwargs.get("connection_class", psycopg.AsyncConnection)), self._refused, pooler)
        # Every connection passes _configure, which also lists it for _fork.
        self._make_pool = functools.partial(
            AsyncConnectionPool, conninfo, **setup.pool_args(), configure=self._configure,
            **kwargs)
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = self._make_pool()
        self._forked = False  # a child's copy, to start its own pool and workers on first use
        self._workers: list[asyncio.Task[None]] = []
        # Idle workers; those holding a connection are woken (or lent to a caller) first, so
        # a job never waits for a connection while another worker holds one idle.
        self._idle_holding: list[_Slot] = []
        self._idle_empty: list[_Slot] = []
        self.conninfo = redact(conninfo)
        self.breaker = breaker
        _fork.track(self)

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        self._core.opened = True
        await self._start()

    async def _start(self) -> None:
        await self._pool.open(wait=False)
        self._workers = [asyncio.create_task(self._worker(), name=f"pgsteady-worker-{i}")
                         for i in range(self._core.pool_size)]

    def _after_fork(self) -> None:
        """In a forked child (see :mod:`pgsteady._fork`): forget the parent's pool, worker
        tasks and counts without calling into them; the first call here, in the child's own
        event loop, starts new ones."""
        _fork.keep(self._pool, self._workers, self._idle_holding, self._idle_empty, self._core)
        core = self._core = self._core.fresh()
        self._workers, self._idle_holding, self._idle_empty = [], [], []
        self.settings = self.settings.for_this_process()  # labelled with the child's pid
        self._make_pool = functools.partial(self._make_pool, kwargs={
            **self._make_pool.keywords["kwargs"], **self.settings.connect_kwargs()})
        self._pool = self._make_pool()
        self._forked = core.opened and not core.closed
        if self.breaker is not None:
            self.breaker.after_fork()

    async def _restart(self) -> None:
        """The first call in a forked child starts the child's own pool and workers."""
        self._forked = False
        await self._start()

    async def wait(self, timeout: Duration = 30.0) -> None:
        """See ``Database.wait``: the Database stays usable if this times out."""
        seconds = to_seconds(timeout, "timeout") or 30.0
        if self._forked:
            await self._restart()
        deadline = time.monotonic() + seconds
        while (self._core.held + self._pool.get_stats().get("pool_available", 0)
               < self._core.pool_size):
            if self._refused:  # it never will: the pooler refuses pooler="direct"
                raise UsageError(self._refused[0])
            if time.monotonic() >= deadline:
                raise CannotConnect(
                    f"the pool could not open {self._core.pool_size} connections to "
                    f"{self.conninfo} within {seconds:g} s; it keeps trying in the background")
            await asyncio.sleep(0.01)

    async def close(self, timeout: float = 10.0) -> None:
        for job in self._core.close():
            _settle(job)
        for slot in self._idle_holding + self._idle_empty:
            _wake(slot.wake, False)
        if self._workers:
            await asyncio.wait(self._workers, timeout=timeout)
        await self._pool.close(timeout)

    async def __aenter__(self) -> AsyncDatabase:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        _fork.remember(conn)
        if self._check_slots:
            self._check_slots = False
            try:
                row = await (await conn.execute(_setup.SLOTS_QUERY)).fetchone()
            except psycopg.Error as exc:  # a check, never a reason to refuse a connection
                log.debug("could not read the server's connection slots: %s", exc)
                await conn.rollback()
            else:
                if row is not None:
                    _setup.warn_if_pool_too_big(self._core.pool_size, *row)
        if self.settings.pooler == "session":
            await conn.execute(*self._set_query)

    # -- calls -------------------------------------------------------------------------------

    async def fetchone(self, query: Query, params: Params | None = None, *,
                       deadline: Duration = DEFAULT) -> Any:
        return await self._call(self._statement(query, params, _one), deadline, single=True)

    async def fetchall(self, query: Query, params: Params | None = None, *,
                       deadline: Duration = DEFAULT) -> list[Any]:
        rows: list[Any] = await self._call(self._statement(query, params, _all), deadline,
                                           single=True)
        return rows

    async def execute(self, query: Query, params: Params | None = None, *,
                      deadline: Duration = DEFAULT) -> int:
        count: int = await self._call(self._statement(query, params, _rowcount), deadline,
                                      single=True)
        return count

    async def run(self, fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]], *,
                  deadline: Duration = DEFAULT) -> T:
        """Run ``await fn(conn)`` in one transaction on a worker; see ``Database.run``."""
        _checks.job_function(fn, "AsyncDatabase", wants_async=True)
        local = self._set_query if self.settings.pooler == "transaction" else None

        async def work(conn: psycopg.AsyncConnection[Any], job: Job) -> T:
            async with conn.transaction():
                if local is not None:
                    await conn.execute(*local)
                result = await fn(conn)
                job.commit_sent = _core.will_commit(conn)  # leaving the block sends COMMIT
            _core.check_committed(conn)
            return result

        result: T = await self._call(work, deadline)
        return result

    def stats(self) -> DatabaseStats:
        return self._core.snapshot()

    # -- moving jobs -------------------------------------------------------------------------

    def _statement(self, query: Query, params: Params | None,
                   fetch: Callable[[psycopg.AsyncCursor[Any]], Awaitable[Any]]) -> AsyncWork:
        _setup.check_statement(query, params, bytes_ok=not self._prefix)
        if not self._prefix:
            async def plain(conn: psycopg.AsyncConnection[Any], job: Job) -> Any:
                job.commit_sent = not conn.closed  # autocommit: the statement commits itself
                cur = _cursors.take(conn)
                result = await fetch(await cur.execute(query, params))
                _cursors.put_back(conn, cur, params)
                return result
            return plain
        prefixed = sql.Composed([sql.SQL(self._prefix), sql.SQL(query) if isinstance(query, str)
                                 else query])

        async def local(conn: psycopg.AsyncConnection[Any], job: Job) -> Any:
            cur = psycopg.AsyncClientCursor(conn)
            job.commit_sent = not conn.closed  # one implicit transaction, committed at its end
            try:
                await cur.execute(prefixed, params)
            except psycopg.errors.ActiveSqlTransaction as exc:
                raise _setup.not_in_transaction_mode(exc) from exc
            cur.nextset()
            return await fetch(cur)

        return local

    def _call(self, work: AsyncWork, deadline: Duration, single: bool = False) -> Awaitable[Any]:
        # A plain function returning the awaitable: one coroutine frame fewer per call.
        if self.breaker is None:
            return self._unguarded(work, deadline, single)
        return _core.aguard(self.breaker, lambda: self._unguarded(work, deadline, single))

    async def _unguarded(self, work: AsyncWork, deadline: Duration, single: bool) -> Any:
        """Run ``work`` and wait for it until the deadline. ``single``: it sends one
        statement, so its caller may run it on a borrowed connection (``_direct``)."""
        if self._forked:
            await self._restart()
        job = _core.new_job(work, deadline, self.default_deadline)
        if single and self._direct and (job.budget is None or job.budget > 0):
            slot = self._core.lend(self._idle_holding, job)
            if slot is not None:
                return await self._drive(slot, job)
        self._core.admit(job)
        job.waker = asyncio.get_running_loop().create_future()
        self._wake_one()
        return await wait_for_outcome(self._core, job)

    def _wake_one(self) -> None:
        for idle in (self._idle_holding, self._idle_empty):
            while idle:
                slot = idle.pop()
                if slot.wake is not None and not slot.wake.done():
                    slot.wake.set_result(True)
                    return

    # -- a caller on a borrowed connection (see _direct) -------------------------------------

    async def _drive(self, slot: _Slot, job: Job) -> Any:
        conn = slot.conn
        assert isinstance(conn, _direct.DrivenAsyncConnection)
        drive = _direct.Drive(job.deadline,
                              lambda gen, interrupted: self._leave(slot, job, gen, interrupted))
        try:
            conn.pgsteady_drive = drive
            result = await job.work(conn, job)
        except _direct.Left as left:  # the deadline passed; the worker finishes the statement
            raise left.error from None
        except BaseException as exc:
            error = _core.direct_failure(exc, drive.handed, job, broken=conn.closed)
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
        conn = slot.conn
        assert isinstance(conn, _direct.DrivenAsyncConnection)
        conn.pgsteady_drive = None
        if (self._core.returned(slot, job, result, error) or slot.wake is None
                or slot.wake.done()):  # a worker woken already looks at the slot itself
            _wake(slot.wake, True)
        else:
            self._idle_holding.append(slot)

    def _leave(self, slot: _Slot, job: Job, gen: Any, interrupted: bool) -> BaseException:
        """The caller leaves mid-statement (its deadline passed, or it was cancelled or
        ``interrupted``): its worker drives the statement to its end."""
        slot.left = (gen, job)
        error = self._core.give_up(job, time.monotonic(), interrupted)
        _wake(slot.wake, True)
        assert error is not None  # a started job ends only by the worker, after this
        return error

    async def _finish_left(self, slot: _Slot, gen: Any, job: Job) -> None:
        assert slot.conn is not None
        error = None
        try:
            await _direct.afinish(slot.conn, gen)
        except BaseException as exc:  # recorded; a worker must not die silently
            error = _core.wrap_error(exc, job, broken=slot.conn.closed)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._core.finish(job, None, error)
            slot.lent = False
            slot.turns += 1

    # -- workers -----------------------------------------------------------------------------

    async def _worker(self) -> None:
        """Take jobs; run each on a connection held between jobs while work keeps coming
        (a pool round trip per job would cost more than the runner itself). While a caller
        has the connection (``_direct``), wait for it back, or for the statement it left."""
        slot = _Slot()
        yielded = False
        try:
            while True:
                left, slot.left = slot.left, None
                if left is not None:
                    await self._finish_left(slot, *left)
                    continue
                if slot.lent:
                    await self._park(slot, listed=False)
                    continue
                if slot.conn is not None and (not _direct.ready(slot.conn)
                                              or slot.turns >= _core.KEEP_CONNECTION_FOR):
                    await self._give_back(slot)  # the pool resets or replaces it
                    continue
                job = self._core.take()
                if job is None:
                    if self._core.closed:
                        return
                    if not yielded and not self._direct:
                        # One turn of the loop first: a caller that just got its answer
                        # usually submits its next job in that turn, which this worker then
                        # takes without being parked and woken (a loop turn saved per call).
                        # With _direct, parking at once is what lets that caller borrow
                        # this connection and skip the hand-off altogether.
                        yielded = True
                        await asyncio.sleep(0)
                        continue
                    yielded = False
                    await self._park(slot, listed=True)
                    continue
                if slot.conn is None and not await self._connection_for(slot, job):
                    continue
                assert slot.conn is not None
                await self._run(job, slot.conn)
                slot.turns += 1
        finally:
            if slot.conn is not None and not slot.lent:
                await self._give_back(slot)

    async def _park(self, slot: _Slot, *, listed: bool) -> None:
        """Wait to be woken for a job, or (``listed`` False: lent) for the connection back or
        the statement its caller left; give the connection back to the pool after a quiet
        while, to let the pool look after it."""
        loop = asyncio.get_running_loop()
        wake = slot.wake = loop.create_future()
        if listed:
            (self._idle_holding if slot.conn is not None else self._idle_empty).append(slot)
        timer = loop.call_later(_core.HOLD_IDLE if slot.conn is not None else _core.IDLE_POLL,
                                _wake, wake, False)
        try:
            woken = await wake
        finally:
            timer.cancel()
            for idle in (self._idle_holding, self._idle_empty):
                if slot in idle:
                    idle.remove(slot)
        if (not woken and not self._core.waiting and not slot.lent
                and slot.conn is not None):
            await self._give_back(slot)

    async def _give_back(self, slot: _Slot) -> None:
        conn = slot.conn
        assert conn is not None
        slot.conn, slot.turns = None, 0
        await _direct.asettle(conn)  # never back to the pool mid-statement or mid-transaction
        self._core.held -= 1
        await self._pool.putconn(conn)

    async def _getconn(self, wait: float) -> psycopg.AsyncConnection[Any]:
        """A connection within ``wait``; with pooler="direct", looked for in short slices, so
        that a pooler's refusal of the startup options ends the wait (see Database)."""
        if not self._check_slots:
            return await self._pool.getconn(timeout=wait)
        end = time.monotonic() + wait
        while not self._refused:
            try:
                return await self._pool.getconn(timeout=min(_REFUSAL_CHECK, wait))
            except PoolTimeout:
                wait = end - time.monotonic()
                if wait <= 0:
                    raise
        raise UsageError(self._refused[0])

    async def _connection_for(self, slot: _Slot, job: Job) -> bool:
        """Get ``slot`` a connection for ``job``; False (the job ended) if none came."""
        remaining = job.remaining(time.monotonic())
        wait = self._connect_timeout if remaining is None else max(remaining, 0.001)
        try:
            conn = await self._getconn(wait)
        except Exception as exc:  # PoolTimeout, PoolClosed, or anything else: never hang
            error = UsageError(self._refused[0]) if self._refused else \
                _core.no_connection_error(exc, wait)
            self._core.no_connection(job, error)
            _settle(job)
            return False
        self._core.held += 1
        slot.conn = conn
        return True

    async def _run(self, job: Job, conn: psycopg.AsyncConnection[Any]) -> None:
        """Run ``job`` to its end on ``conn`` — the deadline does not interrupt it."""
        if not self._core.begin(job, time.monotonic()):
            _settle(job)
            return
        result, error = None, None
        try:
            result = await job.work(conn, job)
        except BaseException as exc:  # recorded for the caller; a worker must not die silently
            error = _core.wrap_error(exc, job, broken=conn.closed)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._core.finish(job, result, error)
            _settle(job)


_IDLE = psycopg.pq.TransactionStatus.IDLE


def _wake(idle: asyncio.Future[bool] | None, woken: bool) -> None:
    if idle is not None and not idle.done():
        idle.set_result(woken)


def _settle(job: Job) -> None:
    """Wake the caller if it is still waiting; its outcome is read from the job."""
    if not job.waker.done():
        job.waker.set_result(None)
