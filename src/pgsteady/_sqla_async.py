"""``AsyncSteady``, and the one source of ``Steady``: see :mod:`pgsteady.sqlalchemy`.

:mod:`pgsteady._sqla_sync` is generated from this module by ``scripts/async_to_sync.py``
(``async``/``await`` dropped, names mapped in pairs, ``if True:  # ASYNC`` blocks replaced
by their ``else:`` part); a test regenerates it and compares, so the two cannot drift. Edit
this module, then run the script. What differs is how jobs move: here a task per job, up to
``concurrency`` at once; in ``Steady``, ``concurrency`` worker threads. The counts are
touched under ``with self._ready:`` in both (here a :class:`~pgsteady._sqla_jobs.NoLock`).
"""

from __future__ import annotations

import asyncio  # async only
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple, overload

from sqlalchemy.sql import Executable
from sqlalchemy.sql.selectable import TypedReturnsRows

from pgsteady import _checks, _core, _fork, _sqla_warm
from pgsteady import _sqla_jobs as _jobs
from pgsteady._core import DEFAULT, DatabaseStats, Job
from pgsteady._sqla_jobs import AsyncConnection, AsyncEngine, AsyncSession
from pgsteady._sqla_wiring import BEGUN, Wiring
from pgsteady.guards.breaker import CircuitBreaker
from pgsteady.settings import Duration, to_seconds

if TYPE_CHECKING:
    from sqlalchemy.engine import Result

    from pgsteady._sqla_jobs import AnyRows

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class AsyncSteady:
    """Deadline-safe transactions over an ``AsyncEngine`` (``postgresql+psycopg``).

    ``concurrency`` jobs hold a connection at once (default: the engine's ``pool_size``);
    up to ``max_waiting`` more wait (default 4x concurrency), beyond that calls fail with
    ``Overloaded``. ``breaker`` counts deadlines and broken connections as failures, as
    ``Database`` does. Sessions are made with ``expire_on_commit=False`` (what ``fn``
    returns is read after the commit), overridable in ``session_kwargs``.
    """

    def __init__(
        self, engine: AsyncEngine, *, pooler: str = "direct", service: str = "pgsteady",
        statement_timeout: Duration = 30.0, lock_timeout: Duration = 5.0,
        idle_in_transaction_timeout: Duration = 60.0, max_waiting: int | None = None,
        concurrency: int | None = None, deadline: Duration = None,
        connect_timeout: Duration = 10.0, breaker: CircuitBreaker | None = None,
        session_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        _checks.breaker(breaker)
        sync_engine = _jobs.async_engine_of(engine)
        setup = _jobs.setup(sync_engine, concurrency=concurrency, max_waiting=max_waiting,
                            service=service, pooler=pooler, statement_timeout=statement_timeout,
                            lock_timeout=lock_timeout,
                            idle_in_transaction_timeout=idle_in_transaction_timeout,
                            deadline=deadline, connect_timeout=connect_timeout)
        self.engine = engine
        self.settings = setup.settings
        self.default_deadline = setup.default_deadline
        self.breaker = breaker
        self._wiring = Wiring(sync_engine, setup.settings, setup.connect_timeout,
                              f"AsyncSteady(service={service!r})")
        self._sessions = _jobs.async_sessions(engine, self._wiring, session_kwargs)
        self._core = _core.Core(setup.pool_size, setup.max_waiting, kind="AsyncSteady")
        self._core.opened = True
        self._forked = False  # a child's copy, to start its own workers on first use
        if True:  # ASYNC
            self._ready = _jobs.NoLock()
            self._active = 0
            self._tasks: set[asyncio.Task[None]] = set()
        else:
            self._ready = threading.Condition()
            self._workers: list[threading.Thread] = []
            self._start()
        _fork.track(self)

    # -- calls -------------------------------------------------------------------------------

    async def run(self, fn: _jobs.ARun[T], *, deadline: Duration = DEFAULT) -> T:
        """``await fn(session)`` in one transaction; commits when it returns, rolls back when
        it raises. Past the deadline the caller gets ``DeadlineExceeded`` and ``fn`` still
        runs to its end (commit or rollback) before its connection returns to the pool."""
        if True:  # ASYNC
            _checks.job_function(fn, "AsyncSteady", wants_async=True)
        else:
            _checks.job_function(fn, "Steady", wants_async=False)
        result: T = await self._call(fn, deadline)
        return result

    @overload
    async def scalar(self, statement: TypedReturnsRows[T], params: _jobs.Params = None, *,
                     deadline: Duration = DEFAULT) -> T | None: ...
    @overload
    async def scalar(self, statement: Executable, params: _jobs.Params = None, *,
                     deadline: Duration = DEFAULT) -> Any: ...
    async def scalar(self, statement: Executable, params: _jobs.Params = None, *,
                     deadline: Duration = DEFAULT) -> Any:
        """The first column of the first row of one statement, or None."""
        if _jobs.is_core(statement):
            async def alone(conn: AsyncConnection) -> Any:
                return await conn.scalar(statement, params)
            return await self._call(alone, deadline, core=True)

        async def work(session: AsyncSession) -> Any:
            return await session.scalar(statement, params)
        return await self._call(work, deadline)

    @overload
    async def scalars(self, statement: TypedReturnsRows[T], params: _jobs.Params = None, *,
                      deadline: Duration = DEFAULT) -> Sequence[T]: ...
    @overload
    async def scalars(self, statement: Executable, params: _jobs.Params = None, *,
                      deadline: Duration = DEFAULT) -> Sequence[Any]: ...
    async def scalars(self, statement: Executable, params: _jobs.Params = None, *,
                      deadline: Duration = DEFAULT) -> Sequence[Any]:
        """The first column of every row."""
        if _jobs.is_core(statement):
            async def alone(conn: AsyncConnection) -> Sequence[Any]:
                return (await conn.scalars(statement, params)).all()
            core_rows: Sequence[Any] = await self._call(alone, deadline, core=True)
            return core_rows

        async def work(session: AsyncSession) -> Sequence[Any]:
            return (await session.scalars(statement, params)).all()
        rows: Sequence[Any] = await self._call(work, deadline)
        return rows

    @overload
    async def execute(self, statement: TypedReturnsRows[*Ts], params: _jobs.Params = None, *,
                      deadline: Duration = DEFAULT) -> Result[*Ts]: ...
    @overload
    async def execute(self, statement: Executable, params: _jobs.Params = None, *,
                      deadline: Duration = DEFAULT) -> AnyRows: ...
    async def execute(self, statement: Executable, params: _jobs.Params = None, *,
                      deadline: Duration = DEFAULT) -> AnyRows:
        """One statement's ``Result``, buffered: rows (or ``rowcount``) read after it
        returns, from memory."""
        if _jobs.is_core(statement):
            async def alone(conn: AsyncConnection) -> AnyRows:
                return _jobs.buffered(await conn.execute(statement, params))
            core_result: AnyRows = await self._call(alone, deadline, core=True)
            return core_result

        async def work(session: AsyncSession) -> AnyRows:
            return _jobs.buffered(await session.execute(statement, params))
        result: AnyRows = await self._call(work, deadline)
        return result

    def stats(self) -> DatabaseStats:
        """Counts as ``Database.stats()`` gives them (``pool_size`` is ``concurrency``)."""
        with self._ready:
            return self._core.snapshot()

    async def warm_up(self, timeout: Duration = 30.0) -> int:
        """Open ``concurrency`` connections of the engine's pool now, with their settings, so
        the first requests after start do not each wait for one (:mod:`pgsteady._sqla_warm`);
        ``CannotConnect`` if they cannot be opened within ``timeout``."""
        return await _sqla_warm.awarm(self.engine, self._core.pool_size,
                                      to_seconds(timeout, "timeout") or 30.0, "AsyncSteady")

    # -- lifecycle ---------------------------------------------------------------------------

    async def aclose(self, timeout: float = 10.0) -> None:
        """Refuse new jobs, fail the queued ones, let started jobs finish (up to ``timeout``),
        and unhook the engine's events. The engine stays the caller's to dispose of."""
        with self._ready:
            for job in self._core.close():
                _jobs.settle(job)
            if True:  # ASYNC
                pass
            else:
                self._ready.notify_all()
        if True:  # ASYNC
            if self._tasks:
                await asyncio.wait(set(self._tasks), timeout=timeout)
        else:
            end = time.monotonic() + timeout
            for worker in self._workers:
                worker.join(max(0.0, end - time.monotonic()))
        self._wiring.remove()

    if True:  # ASYNC
        close = aclose

    async def __aenter__(self) -> AsyncSteady:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _after_fork(self) -> None:
        """In a forked child (:mod:`pgsteady._fork`): forget the parent's workers and counts,
        untouched; the first call here starts the child's own."""
        _fork.keep(self._ready, self._core)
        self._core = self._core.fresh()
        if True:  # ASYNC
            _fork.keep(self._tasks)
            self._ready, self._active, self._tasks = _jobs.NoLock(), 0, set()
        else:
            _fork.keep(self._workers)
            self._ready, self._workers = threading.Condition(), []
        self._forked = not self._core.closed
        self._wiring.after_fork()
        self.settings = self._wiring.settings  # labelled with the child's pid
        if self.breaker is not None:
            self.breaker.after_fork()

    def _restart(self) -> None:  # the first call in a forked child
        with self._ready:
            start, self._forked = self._forked, False
        if start:
            self._start()

    # -- moving jobs -------------------------------------------------------------------------

    async def _call(self, work: _jobs.AWork, deadline: Duration, core: bool = False) -> Any:
        """``work(session)``, or with ``core`` (one Core statement) ``work(connection)`` in
        autocommit."""
        if self.breaker is None:
            return await self._unguarded(work, deadline, core)
        return await _core.aguard(self.breaker, lambda: self._unguarded(work, deadline, core))

    async def _unguarded(self, work: _jobs.AWork, deadline: Duration, core: bool) -> Any:
        if self._forked:
            self._restart()
        job = _core.new_job(_jobs.Alone(work) if core else _jobs.ignore_job(work), deadline,
                            self.default_deadline)
        if True:  # ASYNC
            job.waker = asyncio.get_running_loop().create_future()
        else:
            job.waker = threading.Lock()
            job.waker.acquire()
        with self._ready:
            self._core.admit(job)
            if job.budget == 0:  # no time at all: fail before anything is sent
                error = self._core.give_up(job, job.submitted)
                assert error is not None
                raise error
            if True:  # ASYNC
                self._dispatch()
            else:
                self._ready.notify()
        return await _core.wait_for_outcome(self._core, job, self._ready)

    if True:  # ASYNC
        def _start(self) -> None:
            """Tasks start per job (:meth:`_dispatch`), in the loop of the call."""

        def _dispatch(self) -> None:
            """Start a task for each queued job a slot is free for: the task, not the caller,
            owns the job from here, so no caller's cancellation can reach its query."""
            while self._active < self._core.pool_size:
                job = self._core.take()
                if job is None:
                    return
                self._active += 1
                task = asyncio.create_task(self._execute(job), name="pgsteady-sqlalchemy-job")
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
    else:
        def _start(self) -> None:
            self._workers = [threading.Thread(target=self._worker, daemon=True,
                                              name=f"pgsteady-{self.settings.service}-sa-{i}")
                             for i in range(self._core.pool_size)]
            for worker in self._workers:
                worker.start()

        def _worker(self) -> None:
            while True:
                with self._ready:
                    job = self._core.take()
                    while job is None:
                        if self._core.closed:
                            return
                        self._ready.wait()
                        job = self._core.take()
                self._execute(job)

    async def _execute(self, job: Job) -> None:
        try:
            if isinstance(job.work, _jobs.Alone):
                await self._attempt_alone(job)
            else:
                async with self._sessions() as session:
                    await self._attempt(job, session)
        except Exception as exc:  # closing failed; the job's outcome is recorded, or now
            with self._ready:
                _jobs.unfinished(self._core, job, exc)
        finally:
            if True:  # ASYNC
                self._active -= 1
                _jobs.settle(job)
                self._dispatch()
            else:
                _jobs.settle(job)

    async def _attempt_alone(self, job: Job) -> None:
        """One Core statement on its own, in autocommit: no BEGIN or COMMIT round trip and
        no ORM session. Behind a transaction pooler its settings travel in front of it, in
        one message (see ``_sqla_wiring``), so PgBouncer lends a server connection for
        exactly one round trip — never across this process's Python time."""
        start = time.monotonic()
        conn: AsyncConnection | None = None
        try:
            if True:  # ASYNC
                conn = await self.engine.connect().start()  # the checkout: connecting, if new
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                raw: Any = (await conn.get_raw_connection()).driver_connection
            else:
                conn = self.engine.connect()  # the checkout: connecting, if new
                conn.execution_options(isolation_level="AUTOCOMMIT")
                raw = conn.connection.driver_connection
        except Exception as exc:
            if conn is not None:
                await conn.close()
            with self._ready:
                self._core.no_connection(
                    job, _core.no_connection_error(exc, time.monotonic() - start))
            return
        try:
            with self._ready:
                if not self._core.begin(job, time.monotonic()):
                    return  # dropped: the connection goes back unused
            result, error = None, None
            try:
                with self._wiring.prefixing(raw):
                    job.commit_sent = True  # autocommit: the statement commits itself
                    result = await job.work(conn, job)
            except BaseException as exc:  # recorded for the caller
                error = _jobs.wrap(exc, job)
                if not isinstance(exc, Exception):
                    raise
            finally:
                with self._ready:
                    self._core.finish(job, result, error)
        finally:
            await conn.close()

    async def _attempt(self, job: Job, session: AsyncSession) -> None:
        start = time.monotonic()
        try:
            connection = await session.connection()  # the checkout: connecting, if new
        except Exception as exc:
            with self._ready:
                self._core.no_connection(
                    job, _core.no_connection_error(exc, time.monotonic() - start))
            return
        with self._ready:
            if not self._core.begin(job, time.monotonic()):
                return  # dropped: the connection goes back unused when the session closes
        result, error = None, None
        try:
            if self._wiring.local is not None:
                await connection.exec_driver_sql(*self._wiring.local)
                session.info[BEGUN] = True
            result = await job.work(session, job)
            job.commit_sent = True  # a break from here on leaves the outcome unknown
            await session.commit()
        except BaseException as exc:  # recorded for the caller; rolled back on close
            error = _jobs.wrap(exc, job)
            if not isinstance(exc, Exception):
                raise
        finally:
            with self._ready:
                self._core.finish(job, result, error)
