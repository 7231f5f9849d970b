"""``Steady`` / ``AsyncSteady``: pgsteady's deadline rules over a SQLAlchemy engine.

A caller's deadline ends only the caller's wait, never the query: an ``asyncio.timeout``
around ``session.execute`` cancels the query mid-flight, SQLAlchemy then closes that
connection, and behind PgBouncer every such close destroys a server connection (the pool
drain, docs/outages.md). Here each call is a job: ``fn(session)`` runs in one transaction on a
task (or worker thread) the steady object owns, commits when ``fn`` returns, rolls back when
it raises, and only then gives its connection back to the pool. A job whose caller left
before it started is dropped untouched; the backlog is bounded (``Overloaded``)::

    engine = create_async_engine(url_from_dsn(dsn), pool_size=4, max_overflow=0)
    steady = AsyncSteady(engine, pooler="transaction", service="api")
    name = await steady.scalar(select(User.name).where(User.id == 7), deadline=0.05)
    moved = await steady.run(transfer, deadline=0.2)   # async def transfer(session) -> T

``DeadlineExceeded.phase`` says where the time went: ``queued`` (waiting for one of the
``concurrency`` slots, by default the engine's ``pool_size``, so no job ever waits inside
SQLAlchemy's pool), ``connecting`` (the checkout: the pool opening a connection) or
``running``. The rules themselves are :mod:`pgsteady._core`'s, shared with ``Database``.

Session settings travel as ``Database`` sends them (:class:`~pgsteady.settings.SessionSettings`),
wired into the engine's events: ``direct``: startup ``options``; PgBouncer ``session``: a
``SET`` on each new connection (the pool's ``connect`` event); PgBouncer ``transaction``:
``set_config(..., true)`` inside each job's transaction, and ``prepare_threshold=None``
(PgBouncer 1.18 cannot route prepared statements). ``application_name`` is always a startup
parameter. Create the steady object before the engine's first connection.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, TypeVarTuple, overload

from psycopg.conninfo import conninfo_to_dict

from pgsteady._extras import needs

with needs("sqlalchemy", "pgsteady.sqlalchemy (Steady, AsyncSteady)"):
    from sqlalchemy import URL, Engine
    from sqlalchemy.engine import CursorResult, Result
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.ext.asyncio import (
        AsyncConnection,
        AsyncEngine,
        AsyncSession,
        async_sessionmaker,
    )
    from sqlalchemy.orm import Session, sessionmaker
    from sqlalchemy.sql import Executable
    from sqlalchemy.sql.selectable import TypedReturnsRows

from pgsteady import _core, _fork
from pgsteady._core import Core, DatabaseStats, Job
from pgsteady._sqla_wiring import BEGUN as _BEGUN
from pgsteady._sqla_wiring import Wiring as _Wiring
from pgsteady.arunner import wait_for_outcome
from pgsteady.errors import QueryFailed, UsageError
from pgsteady.guards.breaker import CircuitBreaker
from pgsteady.runner import DEFAULT
from pgsteady.settings import Duration

__all__ = ["AsyncSteady", "Steady", "url_from_dsn"]

log = logging.getLogger("pgsteady.sqlalchemy")

T = TypeVar("T")
Ts = TypeVarTuple("Ts")
Params = Mapping[str, Any] | None
if TYPE_CHECKING:
    AnyRows: TypeAlias = Result[*tuple[Any, ...]]


def url_from_dsn(dsn: str, *, driver: str = "psycopg") -> URL:
    """A SQLAlchemy URL for a libpq DSN (``host=... dbname=...`` or ``postgresql://...``).

    Parameters a URL has no place for (``passfile``, ``sslmode``, a socket directory, several
    hosts) ride along as query arguments, which the psycopg dialect hands back to libpq."""
    _core.check_conninfo(dsn)
    params = {key: str(value) for key, value in conninfo_to_dict(dsn).items()}
    host, port = params.get("host", ""), params.get("port", "")
    plain = bool(host) and not host.startswith("/") and "," not in host + port
    if plain:
        params.pop("host")
    number = params.pop("port") if plain and port.isdigit() else None
    return URL.create(
        f"postgresql+{driver}", username=params.pop("user", None),
        password=params.pop("password", None), host=host if plain else None,
        port=int(number) if number else None, database=params.pop("dbname", None),
        query=params)


def _setup(engine: Engine, *, concurrency: int | None, max_waiting: int | None, service: str,
           pooler: str, statement_timeout: Duration, lock_timeout: Duration,
           idle_in_transaction_timeout: Duration, deadline: Duration,
           connect_timeout: Duration) -> _core.Setup:
    dialect = engine.dialect
    if dialect.name != "postgresql" or dialect.driver != "psycopg":
        raise UsageError(f"pgsteady.sqlalchemy needs a postgresql+psycopg engine (psycopg 3); "
                         f"got {dialect.name}+{dialect.driver}")
    if concurrency is None:
        size = getattr(engine.pool, "size", None)
        if not callable(size):
            raise UsageError(f"the engine's {type(engine.pool).__name__} has no size; pass "
                             f"concurrency= (how many jobs may hold a connection at once)")
        concurrency = int(size())
    return _core.Setup.of(
        pool_size=concurrency, max_waiting=max_waiting, service=service, pooler=pooler,
        statement_timeout=statement_timeout, lock_timeout=lock_timeout,
        idle_in_transaction_timeout=idle_in_transaction_timeout, deadline=deadline,
        connect_timeout=connect_timeout)


def _wrap(exc: BaseException, job: Job) -> BaseException:
    """A broken connection as :class:`QueryFailed` (the breaker counts it), or
    :class:`OutcomeUnknown` when it broke after COMMIT was sent; the statement's own errors
    (a unique violation, its statement_timeout) reach the caller unchanged."""
    if isinstance(exc, DBAPIError):
        broken = bool(exc.connection_invalidated)
        inner = _core.wrap_error(exc.orig, job, broken) if exc.orig is not None else exc
        if isinstance(inner, QueryFailed):
            inner.__cause__ = exc
            return inner
        if broken:
            wrapped = QueryFailed(f"the connection failed during the job: {inner}")
            wrapped.__cause__ = exc
            return wrapped
    return exc


def _buffered(result: Result[*Ts]) -> Result[*Ts]:
    """Rows kept in memory (readable after the connection went back); a DML result as is
    (its rowcount stays), and so is a result with no rows at all (an ORM bulk INSERT or
    UPDATE from a list of rows), which has nothing to freeze."""
    if isinstance(result, CursorResult) and not result.returns_rows:
        result.rowcount  # noqa: B018 - read (and memoized) while the cursor is still open
        return result
    if getattr(result._metadata, "returns_rows", True) is False:
        return result
    return result.freeze()()


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
        if not isinstance(engine, AsyncEngine):
            raise UsageError(f"AsyncSteady needs an AsyncEngine, got {type(engine).__name__}; "
                             f"use Steady for a sync Engine")
        setup = _setup(engine.sync_engine, concurrency=concurrency, max_waiting=max_waiting,
                       service=service, pooler=pooler, statement_timeout=statement_timeout,
                       lock_timeout=lock_timeout,
                       idle_in_transaction_timeout=idle_in_transaction_timeout,
                       deadline=deadline, connect_timeout=connect_timeout)
        self.engine = engine
        self.settings = setup.settings
        self.default_deadline = setup.default_deadline
        self.breaker = breaker
        self._wiring = _Wiring(engine.sync_engine, setup.settings, setup.connect_timeout,
                               f"AsyncSteady(service={service!r})")
        given = dict(session_kwargs or {})
        sync_class: type[Session] = type(  # this object's own class: its events are its own
            "Session", (given.pop("sync_session_class", Session),), {})
        self._sessions = async_sessionmaker(
            engine, **{"expire_on_commit": False, "sync_session_class": sync_class, **given})
        self._wiring.sessions(sync_class)
        self._core = Core(setup.pool_size, setup.max_waiting, kind="AsyncSteady")
        self._core.opened = True
        self._active = 0
        self._tasks: set[asyncio.Task[None]] = set()
        _fork.track(self)

    def _after_fork(self) -> None:
        """In a forked child (:mod:`pgsteady._fork`): forget the parent's tasks, untouched."""
        _fork.keep(self._tasks, self._core)
        self._core = self._core.fresh()
        self._active, self._tasks = 0, set()
        self._wiring.after_fork()
        if self.breaker is not None:
            self.breaker.after_fork()

    # -- calls -------------------------------------------------------------------------------

    async def run(self, fn: Callable[[AsyncSession], Awaitable[T]], *,
                  deadline: Duration = DEFAULT) -> T:
        """``await fn(session)`` in one transaction; commits when it returns, rolls back when
        it raises. Past the deadline the caller gets ``DeadlineExceeded`` and ``fn`` still
        runs to its end (commit or rollback) before its connection returns to the pool."""
        result: T = await self._call(fn, deadline)
        return result

    @overload
    async def scalar(self, statement: TypedReturnsRows[T], params: Params = None, *,
                     deadline: Duration = DEFAULT) -> T | None: ...
    @overload
    async def scalar(self, statement: Executable, params: Params = None, *,
                     deadline: Duration = DEFAULT) -> Any: ...
    async def scalar(self, statement: Executable, params: Params = None, *,
                     deadline: Duration = DEFAULT) -> Any:
        """The first column of the first row of one statement, or None."""
        if _is_core(statement):
            async def alone(conn: AsyncConnection) -> Any:
                return await conn.scalar(statement, params)
            return await self._call(alone, deadline, core=True)

        async def work(session: AsyncSession) -> Any:
            return await session.scalar(statement, params)
        return await self._call(work, deadline)

    @overload
    async def scalars(self, statement: TypedReturnsRows[T], params: Params = None, *,
                      deadline: Duration = DEFAULT) -> Sequence[T]: ...
    @overload
    async def scalars(self, statement: Executable, params: Params = None, *,
                      deadline: Duration = DEFAULT) -> Sequence[Any]: ...
    async def scalars(self, statement: Executable, params: Params = None, *,
                      deadline: Duration = DEFAULT) -> Sequence[Any]:
        """The first column of every row."""
        if _is_core(statement):
            async def alone(conn: AsyncConnection) -> Sequence[Any]:
                return (await conn.scalars(statement, params)).all()
            core_rows: Sequence[Any] = await self._call(alone, deadline, core=True)
            return core_rows

        async def work(session: AsyncSession) -> Sequence[Any]:
            return (await session.scalars(statement, params)).all()
        rows: Sequence[Any] = await self._call(work, deadline)
        return rows

    @overload
    async def execute(self, statement: TypedReturnsRows[*Ts], params: Params = None, *,
                      deadline: Duration = DEFAULT) -> Result[*Ts]: ...
    @overload
    async def execute(self, statement: Executable, params: Params = None, *,
                      deadline: Duration = DEFAULT) -> AnyRows: ...
    async def execute(self, statement: Executable, params: Params = None, *,
                      deadline: Duration = DEFAULT) -> AnyRows:
        """One statement's ``Result``, buffered: rows (or ``rowcount``) read after it
        returns, from memory."""
        if _is_core(statement):
            async def alone(conn: AsyncConnection) -> AnyRows:
                return _buffered(await conn.execute(statement, params))
            core_result: AnyRows = await self._call(alone, deadline, core=True)
            return core_result

        async def work(session: AsyncSession) -> AnyRows:
            return _buffered(await session.execute(statement, params))
        result: AnyRows = await self._call(work, deadline)
        return result

    def stats(self) -> DatabaseStats:
        """Counts as ``Database.stats()`` gives them (``pool_size`` is ``concurrency``)."""
        return self._core.snapshot()

    # -- lifecycle ---------------------------------------------------------------------------

    async def aclose(self, timeout: float = 10.0) -> None:
        """Refuse new jobs, fail the queued ones, let started jobs finish (up to ``timeout``),
        and unhook the engine's events. The engine stays the caller's to dispose of."""
        for job in self._core.close():
            _settle(job)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
        self._wiring.remove()

    close = aclose

    async def __aenter__(self) -> AsyncSteady:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- moving jobs -------------------------------------------------------------------------

    async def _call(self, work: Callable[[Any], Awaitable[Any]], deadline: Duration,
                    core: bool = False) -> Any:
        if self.breaker is None:
            return await self._unguarded(work, deadline, core)
        return await self.breaker.aguard(lambda: self._unguarded(work, deadline, core),
                                         _core.breaker_verdict)

    async def _unguarded(self, work: Callable[[Any], Awaitable[Any]], deadline: Duration,
                         core: bool) -> Any:
        budget = self.default_deadline if deadline is DEFAULT else _core.deadline_of(deadline)
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        job = Job(_Alone(work) if core else _ignore_job(work), budget, now,
                  None if budget is None else now + budget)
        self._core.admit(job)
        job.waker = loop.create_future()
        if budget == 0:  # no time at all: fail before anything is sent
            error = self._core.give_up(job, now)
            assert error is not None
            raise error
        self._dispatch()
        return await wait_for_outcome(self._core, job)

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

    async def _execute(self, job: Job) -> None:
        try:
            if isinstance(job.work, _Alone):
                await self._attempt_alone(job)
            else:
                async with self._sessions() as session:
                    await self._attempt(job, session)
        except Exception as exc:  # closing failed; the job's outcome is recorded, or now
            _unfinished(self._core, job, exc)
        finally:
            self._active -= 1
            _settle(job)
            self._dispatch()

    async def _attempt_alone(self, job: Job) -> None:
        """One Core statement on its own, in autocommit: no BEGIN or COMMIT round trip and
        no ORM session. Behind a transaction pooler its settings travel in front of it, in
        one message (see ``_sqla_wiring``), so PgBouncer lends a server connection for
        exactly one round trip — never across this process's Python time."""
        start = time.monotonic()
        try:
            conn = await self.engine.connect().start()  # the checkout: connecting, if new
        except Exception as exc:
            self._core.no_connection(
                job, _core.no_connection_error(exc, time.monotonic() - start))
            return
        try:
            await self._alone_on(job, conn, start)
        finally:
            await conn.close()

    async def _alone_on(self, job: Job, conn: AsyncConnection, start: float) -> None:
        try:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            raw: Any = (await conn.get_raw_connection()).driver_connection
        except Exception as exc:
            self._core.no_connection(
                job, _core.no_connection_error(exc, time.monotonic() - start))
            return
        if not self._core.begin(job, time.monotonic()):
            return  # dropped: the connection goes back unused
        result, error = None, None
        try:
            with self._wiring.prefixing(raw):
                job.commit_sent = True  # autocommit: the statement commits itself
                result = await job.work(conn, job)
        except BaseException as exc:  # recorded for the caller
            error = _wrap(exc, job)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._core.finish(job, result, error)

    async def _attempt(self, job: Job, session: AsyncSession) -> None:
        start = time.monotonic()
        try:
            connection = await session.connection()  # the checkout: connecting, if new
        except Exception as exc:
            self._core.no_connection(
                job, _core.no_connection_error(exc, time.monotonic() - start))
            return
        if not self._core.begin(job, time.monotonic()):
            return  # dropped: the connection goes back unused when the session closes
        result, error = None, None
        try:
            if self._wiring.local is not None:
                await connection.exec_driver_sql(*self._wiring.local)
                session.info[_BEGUN] = True
            result = await job.work(session, job)
            job.commit_sent = True  # a break from here on leaves the outcome unknown
            await session.commit()
        except BaseException as exc:  # recorded for the caller; rolled back on close
            error = _wrap(exc, job)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._core.finish(job, result, error)


def _is_core(statement: Executable) -> bool:
    """Whether ``statement`` is plain Core (``text()``, a table's ``select``/``insert``...),
    which a connection runs as well as a Session; an ORM statement (``select(User)``) needs
    the Session to return entities. (The attribute is the one Session itself consults; if a
    SQLAlchemy ever lacks it, everything goes through a Session, as before.)"""
    attrs = getattr(statement, "_propagate_attrs", None)
    return isinstance(attrs, Mapping) and attrs.get("compile_state_plugin") is None


class _Alone:
    """A job's work of one Core statement, run on a connection (not a Session)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, conn: Any, _job: Job) -> Any:
        return self.fn(conn)


def _unfinished(core: Core, job: Job, exc: Exception) -> None:
    """A job's task or thread failed outside its attempt (closing its connection, say): log
    it, and if the job never got an outcome, fail it, so that its caller never takes a
    missing result for a NULL."""
    log.exception("a job's connection or session failed outside the job")
    if job.state == _core.State.CONNECTING:
        core.no_connection(job, _core.no_connection_error(exc, 0.0))


def _ignore_job(fn: Callable[[Any], Any]) -> Callable[[Any, Job], Any]:
    """The runners' work takes ``(conn, job)``; a user's ``fn`` takes the session only."""
    return lambda session, job: fn(session)


def _settle(job: Job) -> None:
    """Wake the caller if it is still waiting; its outcome is read from the job."""
    if not job.waker.done():
        job.waker.set_result(None)


class Steady:
    """:class:`AsyncSteady` for a sync ``Engine``: ``fn(session)`` runs on one of
    ``concurrency`` worker threads (default: the engine's ``pool_size``); the caller waits
    for its future with the deadline and leaves the job to finish without it."""

    def __init__(
        self, engine: Engine, *, pooler: str = "direct", service: str = "pgsteady",
        statement_timeout: Duration = 30.0, lock_timeout: Duration = 5.0,
        idle_in_transaction_timeout: Duration = 60.0, max_waiting: int | None = None,
        concurrency: int | None = None, deadline: Duration = None,
        connect_timeout: Duration = 10.0, breaker: CircuitBreaker | None = None,
        session_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(engine, Engine):
            raise UsageError(f"Steady needs a sync Engine, got {type(engine).__name__}; "
                             f"use AsyncSteady for an AsyncEngine")
        setup = _setup(engine, concurrency=concurrency, max_waiting=max_waiting,
                       service=service, pooler=pooler, statement_timeout=statement_timeout,
                       lock_timeout=lock_timeout,
                       idle_in_transaction_timeout=idle_in_transaction_timeout,
                       deadline=deadline, connect_timeout=connect_timeout)
        self.engine = engine
        self.settings = setup.settings
        self.default_deadline = setup.default_deadline
        self.breaker = breaker
        self._wiring = _Wiring(engine, setup.settings, setup.connect_timeout,
                               f"Steady(service={service!r})")
        self._sessions = sessionmaker(engine, **{"expire_on_commit": False,
                                                 **(session_kwargs or {})})
        self._wiring.sessions(self._sessions)  # a sessionmaker's events are its own class's
        self._core = Core(setup.pool_size, setup.max_waiting, kind="Steady")
        self._core.opened = True
        self._ready = threading.Condition()
        self._workers: list[threading.Thread] = []
        self._forked = False  # a child's copy, to start its own workers on first use
        self._start()
        _fork.track(self)

    def _start(self) -> None:
        self._workers = [threading.Thread(target=self._worker, daemon=True,
                                          name=f"pgsteady-{self.settings.service}-sa-{i}")
                         for i in range(self._core.pool_size)]
        for worker in self._workers:
            worker.start()

    def _after_fork(self) -> None:
        """In a forked child (:mod:`pgsteady._fork`): forget the parent's workers, untouched;
        the first call here starts the child's own."""
        _fork.keep(self._workers, self._ready, self._core)
        self._core = self._core.fresh()
        self._ready, self._workers = threading.Condition(), []
        self._forked = not self._core.closed
        self._wiring.after_fork()
        if self.breaker is not None:
            self.breaker.after_fork()

    def _restart(self) -> None:  # the first call in a forked child
        with self._ready:
            start, self._forked = self._forked, False
        if start:
            self._start()

    # -- calls -------------------------------------------------------------------------------

    def run(self, fn: Callable[[Session], T], *, deadline: Duration = DEFAULT) -> T:
        """``fn(session)`` in one transaction on a worker; see :meth:`AsyncSteady.run`."""
        result: T = self._call(fn, deadline)
        return result

    @overload
    def scalar(self, statement: TypedReturnsRows[T], params: Params = None, *,
               deadline: Duration = DEFAULT) -> T | None: ...
    @overload
    def scalar(self, statement: Executable, params: Params = None, *,
               deadline: Duration = DEFAULT) -> Any: ...
    def scalar(self, statement: Executable, params: Params = None, *,
               deadline: Duration = DEFAULT) -> Any:
        """The first column of the first row of one statement, or None."""
        if _is_core(statement):
            return self._call(lambda conn: conn.scalar(statement, params), deadline, core=True)
        return self._call(lambda session: session.scalar(statement, params), deadline)

    @overload
    def scalars(self, statement: TypedReturnsRows[T], params: Params = None, *,
                deadline: Duration = DEFAULT) -> Sequence[T]: ...
    @overload
    def scalars(self, statement: Executable, params: Params = None, *,
                deadline: Duration = DEFAULT) -> Sequence[Any]: ...
    def scalars(self, statement: Executable, params: Params = None, *,
                deadline: Duration = DEFAULT) -> Sequence[Any]:
        """The first column of every row."""
        rows: Sequence[Any] = self._call(
            lambda on: on.scalars(statement, params).all(), deadline, core=_is_core(statement))
        return rows

    @overload
    def execute(self, statement: TypedReturnsRows[*Ts], params: Params = None, *,
                deadline: Duration = DEFAULT) -> Result[*Ts]: ...
    @overload
    def execute(self, statement: Executable, params: Params = None, *,
                deadline: Duration = DEFAULT) -> AnyRows: ...
    def execute(self, statement: Executable, params: Params = None, *,
                deadline: Duration = DEFAULT) -> AnyRows:
        """One statement's ``Result``, buffered (see :meth:`AsyncSteady.execute`)."""
        result: AnyRows = self._call(
            lambda on: _buffered(on.execute(statement, params)), deadline,
            core=_is_core(statement))
        return result

    def stats(self) -> DatabaseStats:
        with self._ready:
            return self._core.snapshot()

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self, timeout: float = 10.0) -> None:
        """Refuse new jobs, fail the queued ones, let started jobs finish (up to ``timeout``),
        and unhook the engine's events. The engine stays the caller's to dispose of."""
        with self._ready:
            for job in self._core.close():
                job.waker.release()
            self._ready.notify_all()
        end = time.monotonic() + timeout
        for worker in self._workers:
            worker.join(max(0.0, end - time.monotonic()))
        self._wiring.remove()

    def __enter__(self) -> Steady:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- moving jobs -------------------------------------------------------------------------

    def _call(self, work: Callable[[Any], Any], deadline: Duration, core: bool = False) -> Any:
        """``work(session)``, or with ``core`` (one Core statement) ``work(connection)`` in
        autocommit, as :class:`AsyncSteady` runs them."""
        if self.breaker is None:
            return self._unguarded(work, deadline, core)
        return self.breaker.guard(lambda: self._unguarded(work, deadline, core),
                                  _core.breaker_verdict)

    def _unguarded(self, work: Callable[[Any], Any], deadline: Duration, core: bool) -> Any:
        if self._forked:
            self._restart()
        budget = self.default_deadline if deadline is DEFAULT else _core.deadline_of(deadline)
        now = time.monotonic()
        job = Job(_Alone(work) if core else _ignore_job(work), budget, now,
                  None if budget is None else now + budget)
        job.waker = threading.Lock()
        job.waker.acquire()
        with self._ready:
            self._core.admit(job)
            if budget == 0:  # no time at all: fail before anything is sent
                error = self._core.give_up(job, now)
                assert error is not None
                raise error
            self._ready.notify()
        try:
            answered = job.waker.acquire(timeout=-1 if budget is None else budget)
        except BaseException:  # raised into the wait: the caller left, as at its deadline
            with self._ready:
                self._core.give_up(job, time.monotonic(), interrupted=True)
            raise
        with self._ready:
            if answered:
                return self._core.outcome(job, time.monotonic())
            error = self._core.give_up(job, time.monotonic())
            if error is None:  # it ended just now: take its outcome
                return self._core.outcome(job, time.monotonic())
        raise error

    def _worker(self) -> None:
        while True:
            with self._ready:
                job = self._core.take()
                while job is None:
                    if self._core.closed:
                        return
                    self._ready.wait()
                    job = self._core.take()
            try:
                if isinstance(job.work, _Alone):
                    self._attempt_alone(job)
                else:
                    with self._sessions() as session:
                        self._attempt(job, session)
            except Exception as exc:  # closing failed; the job's outcome is recorded, or now
                with self._ready:
                    _unfinished(self._core, job, exc)
            finally:
                job.waker.release()

    def _attempt_alone(self, job: Job) -> None:
        """One Core statement in autocommit (see :meth:`AsyncSteady._attempt_alone`)."""
        start = time.monotonic()
        conn = None
        try:
            conn = self.engine.connect()  # the checkout: connecting, if new
            conn.execution_options(isolation_level="AUTOCOMMIT")
            raw: Any = conn.connection.driver_connection
        except Exception as exc:
            if conn is not None:
                conn.close()
            with self._ready:
                self._core.no_connection(
                    job, _core.no_connection_error(exc, time.monotonic() - start))
            return
        with conn:
            with self._ready:
                if not self._core.begin(job, time.monotonic()):
                    return  # dropped: the connection goes back unused
            result, error = None, None
            try:
                with self._wiring.prefixing(raw):
                    job.commit_sent = True  # autocommit: the statement commits itself
                    result = job.work(conn, job)
            except BaseException as exc:  # recorded for the caller
                error = _wrap(exc, job)
                if not isinstance(exc, Exception):
                    raise
            finally:
                with self._ready:
                    self._core.finish(job, result, error)

    def _attempt(self, job: Job, session: Session) -> None:
        start = time.monotonic()
        try:
            connection = session.connection()  # the checkout: connecting, if new
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
                connection.exec_driver_sql(*self._wiring.local)
                session.info[_BEGUN] = True
            result = job.work(session, job)
            job.commit_sent = True  # a break from here on leaves the outcome unknown
            session.commit()
        except BaseException as exc:  # recorded for the caller; rolled back on close
            error = _wrap(exc, job)
            if not isinstance(exc, Exception):
                raise
        finally:
            with self._ready:
                self._core.finish(job, result, error)
