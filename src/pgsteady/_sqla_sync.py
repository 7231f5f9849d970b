"""``Steady``: :class:`~pgsteady._sqla_async.AsyncSteady` for a sync ``Engine``, on
worker threads (see :mod:`pgsteady.sqlalchemy`).

GENERATED from ``_sqla_async.py`` by ``scripts/async_to_sync.py``: do not edit; edit the
async source and run the script.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple, overload

from sqlalchemy.sql import Executable
from sqlalchemy.sql.selectable import TypedReturnsRows

from pgsteady import _checks, _core, _fork, _sqla_warm
from pgsteady import _sqla_jobs as _jobs
from pgsteady._core import DEFAULT, DatabaseStats, Job
from pgsteady._sqla_jobs import Connection, Engine, Session
from pgsteady._sqla_wiring import BEGUN, Wiring
from pgsteady.guards.breaker import CircuitBreaker
from pgsteady.settings import Duration, to_seconds

if TYPE_CHECKING:
    from sqlalchemy.engine import Result

    from pgsteady._sqla_jobs import AnyRows

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class Steady:
    """Deadline-safe transactions over an ``Engine`` (``postgresql+psycopg``).

    ``concurrency`` jobs hold a connection at once (default: the engine's ``pool_size``);
    up to ``max_waiting`` more wait (default 4x concurrency), beyond that calls fail with
    ``Overloaded``. ``breaker`` counts deadlines and broken connections as failures, as
    ``Database`` does. Sessions are made with ``expire_on_commit=False`` (what ``fn``
    returns is read after the commit), overridable in ``session_kwargs``.
    """

    def __init__(
        self, engine: Engine, *, pooler: str = "direct", service: str = "pgsteady",
        statement_timeout: Duration = 30.0, lock_timeout: Duration = 5.0,
        idle_in_transaction_timeout: Duration = 60.0, max_waiting: int | None = None,
        concurrency: int | None = None, deadline: Duration = None,
        connect_timeout: Duration = 10.0, breaker: CircuitBreaker | None = None,
        session_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        _checks.breaker(breaker)
        sync_engine = _jobs.sync_engine_of(engine)
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
                              f"Steady(service={service!r})")
        self._sessions = _jobs.sync_sessions(engine, self._wiring, session_kwargs)
        self._core = _core.Core(setup.pool_size, setup.max_waiting, kind="Steady")
        self._core.opened = True
        self._forked = False  # a child's copy, to start its own workers on first use
        self._ready = threading.Condition()
        self._workers: list[threading.Thread] = []
        self._start()
        _fork.track(self)

    # -- calls -------------------------------------------------------------------------------

    def run(self, fn: _jobs.Run[T], *, deadline: Duration = DEFAULT) -> T:
        """``fn(session)`` in one transaction; commits when it returns, rolls back when
        it raises. Past the deadline the caller gets ``DeadlineExceeded`` and ``fn`` still
        runs to its end (commit or rollback) before its connection returns to the pool."""
        _checks.job_function(fn, "Steady", wants_async=False)
        result: T = self._call(fn, deadline)
        return result

    @overload
    def scalar(self, statement: TypedReturnsRows[T], params: _jobs.Params = None, *,
                     deadline: Duration = DEFAULT) -> T | None: ...
    @overload
    def scalar(self, statement: Executable, params: _jobs.Params = None, *,
                     deadline: Duration = DEFAULT) -> Any: ...
    def scalar(self, statement: Executable, params: _jobs.Params = None, *,
                     deadline: Duration = DEFAULT) -> Any:
        """The first column of the first row of one statement, or None."""
        if _jobs.is_core(statement):
            def alone(conn: Connection) -> Any:
                return conn.scalar(statement, params)
            return self._call(alone, deadline, core=True)

        def work(session: Session) -> Any:
            return session.scalar(statement, params)
        return self._call(work, deadline)

    @overload
    def scalars(self, statement: TypedReturnsRows[T], params: _jobs.Params = None, *,
                      deadline: Duration = DEFAULT) -> Sequence[T]: ...
    @overload
    def scalars(self, statement: Executable, params: _jobs.Params = None, *,
                      deadline: Duration = DEFAULT) -> Sequence[Any]: ...
    def scalars(self, statement: Executable, params: _jobs.Params = None, *,
                      deadline: Duration = DEFAULT) -> Sequence[Any]:
        """The first column of every row."""
        if _jobs.is_core(statement):
            def alone(conn: Connection) -> Sequence[Any]:
                return (conn.scalars(statement, params)).all()
            core_rows: Sequence[Any] = self._call(alone, deadline, core=True)
            return core_rows

        def work(session: Session) -> Sequence[Any]:
            return (session.scalars(statement, params)).all()
        rows: Sequence[Any] = self._call(work, deadline)
        return rows

    @overload
    def execute(self, statement: TypedReturnsRows[*Ts], params: _jobs.Params = None, *,
                      deadline: Duration = DEFAULT) -> Result[*Ts]: ...
    @overload
    def execute(self, statement: Executable, params: _jobs.Params = None, *,
                      deadline: Duration = DEFAULT) -> AnyRows: ...
    def execute(self, statement: Executable, params: _jobs.Params = None, *,
                      deadline: Duration = DEFAULT) -> AnyRows:
        """One statement's ``Result``, buffered: rows (or ``rowcount``) read after it
        returns, from memory."""
        if _jobs.is_core(statement):
            def alone(conn: Connection) -> AnyRows:
                return _jobs.buffered(conn.execute(statement, params))
            core_result: AnyRows = self._call(alone, deadline, core=True)
            return core_result

        def work(session: Session) -> AnyRows:
            return _jobs.buffered(session.execute(statement, params))
        result: AnyRows = self._call(work, deadline)
        return result

    def stats(self) -> DatabaseStats:
        """Counts as ``Database.stats()`` gives them (``pool_size`` is ``concurrency``)."""
        with self._ready:
            return self._core.snapshot()

    def warm_up(self, timeout: Duration = 30.0) -> int:
        """Open ``concurrency`` connections of the engine's pool now, with their settings, so
        the first requests after start do not each wait for one (:mod:`pgsteady._sqla_warm`);
        ``CannotConnect`` if they cannot be opened within ``timeout``."""
        return _sqla_warm.warm(self.engine, self._core.pool_size,
                                      to_seconds(timeout, "timeout") or 30.0, "Steady")

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self, timeout: float = 10.0) -> None:
        """Refuse new jobs, fail the queued ones, let started jobs finish (up to ``timeout``),
        and unhook the engine's events. The engine stays the caller's to dispose of."""
        with self._ready:
            for job in self._core.close():
                _jobs.settle(job)
            self._ready.notify_all()
        end = time.monotonic() + timeout
        for worker in self._workers:
            worker.join(max(0.0, end - time.monotonic()))
        self._wiring.remove()


    def __enter__(self) -> Steady:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _after_fork(self) -> None:
        """In a forked child (:mod:`pgsteady._fork`): forget the parent's workers and counts,
        untouched; the first call here starts the child's own."""
        _fork.keep(self._ready, self._core)
        self._core = self._core.fresh()
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

    def _call(self, work: _jobs.Work, deadline: Duration, core: bool = False) -> Any:
        """``work(session)``, or with ``core`` (one Core statement) ``work(connection)`` in
        autocommit."""
        if self.breaker is None:
            return self._unguarded(work, deadline, core)
        return _core.guard(self.breaker, lambda: self._unguarded(work, deadline, core))

    def _unguarded(self, work: _jobs.Work, deadline: Duration, core: bool) -> Any:
        if self._forked:
            self._restart()
        job = _core.new_job(_jobs.Alone(work) if core else _jobs.ignore_job(work), deadline,
                            self.default_deadline)
        job.waker = threading.Lock()
        job.waker.acquire()
        with self._ready:
            self._core.admit(job)
            if job.budget == 0:  # no time at all: fail before anything is sent
                error = self._core.give_up(job, job.submitted)
                assert error is not None
                raise error
            self._ready.notify()
        return _core.wait_for_outcome_in_thread(self._core, job, self._ready)

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

    def _execute(self, job: Job) -> None:
        try:
            if isinstance(job.work, _jobs.Alone):
                self._attempt_alone(job)
            else:
                with self._sessions() as session:
                    self._attempt(job, session)
        except Exception as exc:  # closing failed; the job's outcome is recorded, or now
            with self._ready:
                _jobs.unfinished(self._core, job, exc)
        finally:
            _jobs.settle(job)

    def _attempt_alone(self, job: Job) -> None:
        """One Core statement on its own, in autocommit: no BEGIN or COMMIT round trip and
        no ORM session. Behind a transaction pooler its settings travel in front of it, in
        one message (see ``_sqla_wiring``), so PgBouncer lends a server connection for
        exactly one round trip — never across this process's Python time."""
        start = time.monotonic()
        conn: Connection | None = None
        try:
            conn = self.engine.connect()  # the checkout: connecting, if new
            conn.execution_options(isolation_level="AUTOCOMMIT")
            raw = conn.connection.driver_connection
        except Exception as exc:
            if conn is not None:
                conn.close()
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
                    result = job.work(conn, job)
            except BaseException as exc:  # recorded for the caller
                error = _jobs.wrap(exc, job)
                if not isinstance(exc, Exception):
                    raise
            finally:
                with self._ready:
                    self._core.finish(job, result, error)
        finally:
            conn.close()

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
                session.info[BEGUN] = True
            result = job.work(session, job)
            job.commit_sent = True  # a break from here on leaves the outcome unknown
            session.commit()
        except BaseException as exc:  # recorded for the caller; rolled back on close
            error = _jobs.wrap(exc, job)
            if not isinstance(exc, Exception):
                raise
        finally:
            with self._ready:
                self._core.finish(job, result, error)
