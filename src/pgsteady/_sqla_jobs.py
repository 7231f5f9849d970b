"""What ``Steady`` and ``AsyncSteady`` share besides their one source (:mod:`pgsteady._sqla_async`,
from which :mod:`pgsteady._sqla_sync` is generated): checks, error wrapping, the job shapes,
and the few names that differ between the two worlds, in pairs the generator maps one to the
other (``async_engine_of`` -> ``sync_engine_of``, ``AsyncSession`` -> ``Session``, ...).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, TypeVarTuple

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import CursorResult, Result
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql import Executable

from pgsteady import _core, _setup
from pgsteady._core import Core, Job
from pgsteady._sqla_wiring import Wiring
from pgsteady.errors import QueryFailed, UsageError
from pgsteady.settings import Duration, describe

__all__ = [
    "ARun", "AWork", "AnyRows", "AsyncConnection", "AsyncEngine", "AsyncSession", "Connection",
    "Engine", "NoLock", "Params", "Run", "Session", "Work", "async_engine_of", "async_sessions",
    "settle", "sync_engine_of", "sync_sessions",
]

log = logging.getLogger("pgsteady.sqlalchemy")

T = TypeVar("T")
Ts = TypeVarTuple("Ts")
Params = Mapping[str, Any] | None
AWork: TypeAlias = Callable[[Any], Awaitable[Any]]
"""A job's work as AsyncSteady gets it: ``await work(session or connection)``."""
Work: TypeAlias = Callable[[Any], Any]
ARun: TypeAlias = Callable[[AsyncSession], Awaitable[T]]
"""What ``AsyncSteady.run`` takes: ``await fn(session)``; ``Steady.run`` takes a :data:`Run`."""
Run: TypeAlias = Callable[[Session], T]
if TYPE_CHECKING:
    AnyRows: TypeAlias = Result[*tuple[Any, ...]]


class NoLock:
    """``with self._ready:`` in AsyncSteady: one event loop needs no lock (Steady's is a
    ``threading.Condition``), so the two share the lines that touch the counts."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def async_engine_of(engine: object) -> Engine:
    """The sync engine under an ``AsyncEngine``, or a UsageError naming what was given."""
    if not isinstance(engine, AsyncEngine):
        raise UsageError(f"AsyncSteady needs an AsyncEngine, got {type(engine).__name__}; "
                         f"use Steady for a sync Engine")
    return engine.sync_engine


def sync_engine_of(engine: object) -> Engine:
    if not isinstance(engine, Engine):
        raise UsageError(f"Steady needs a sync Engine, got {type(engine).__name__}; "
                         f"use AsyncSteady for an AsyncEngine")
    return engine


def async_sessions(engine: AsyncEngine, wiring: Wiring,
                   session_kwargs: Mapping[str, Any] | None) -> async_sessionmaker[AsyncSession]:
    """The steady object's own session factory (``expire_on_commit=False`` unless given):
    its sync session class is made for it, so the wiring's events are this object's only."""
    given = dict(session_kwargs or {})
    sync_class: type[Session] = type("Session", (given.pop("sync_session_class", Session),), {})
    wiring.sessions(sync_class)
    return async_sessionmaker(
        engine, **{"expire_on_commit": False, "sync_session_class": sync_class, **given})


def sync_sessions(engine: Engine, wiring: Wiring,
                  session_kwargs: Mapping[str, Any] | None) -> sessionmaker[Session]:
    sessions = sessionmaker(engine, **{"expire_on_commit": False, **(session_kwargs or {})})
    wiring.sessions(sessions)  # a sessionmaker's events are its own class's
    return sessions


def settle(job: Job) -> None:
    """Wake the job's caller, if still waiting: its outcome is read from the job."""
    waker = job.waker
    if isinstance(waker, asyncio.Future):
        if not waker.done():
            waker.set_result(None)
    else:
        waker.release()


def setup(engine: Engine, *, concurrency: int | None, max_waiting: int | None, service: str,
           pooler: str, statement_timeout: Duration, lock_timeout: Duration,
           idle_in_transaction_timeout: Duration, deadline: Duration,
           connect_timeout: Duration) -> _setup.Setup:
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
    elif (capacity := _pool_capacity(engine)) is not None and \
            isinstance(concurrency, int) and concurrency > capacity:
        raise UsageError(f"concurrency={concurrency} is more than the engine's pool can lend "
                         f"({capacity}: pool_size + max_overflow); the rest would wait in "
                         f"SQLAlchemy's pool past every deadline. Lower concurrency or raise "
                         f"the engine's pool_size")
    return _setup.Setup.of(
        pool_size=concurrency, max_waiting=max_waiting, service=service, pooler=pooler,
        statement_timeout=statement_timeout, lock_timeout=lock_timeout,
        idle_in_transaction_timeout=idle_in_transaction_timeout, deadline=deadline,
        connect_timeout=connect_timeout)


def _pool_capacity(engine: Engine) -> int | None:
    """How many connections the engine's pool lends at once, when it says (a QueuePool's
    size plus its overflow); None when unbounded or unknown."""
    size, overflow = getattr(engine.pool, "size", None), getattr(engine.pool, "_max_overflow", None)
    if not callable(size) or not isinstance(overflow, int) or overflow < 0:
        return None
    return int(size()) + overflow


def wrap(exc: BaseException, job: Job) -> BaseException:
    """A broken connection as :class:`QueryFailed` (the breaker counts it), or
    :class:`OutcomeUnknown` when it broke after COMMIT was sent; the statement's own errors
    (a unique violation, its statement_timeout) reach the caller unchanged."""
    if isinstance(exc, DBAPIError):
        broken = bool(exc.connection_invalidated)
        inner = _core.wrap_error(exc.orig, job, broken) if exc.orig is not None else exc
        # pgsteady's errors keep the driver's error as __cause__, not SQLAlchemy's wrapper,
        # whose text carries the statement's parameters ("[parameters: ...]") into logs.
        if isinstance(inner, QueryFailed):
            return inner
        if broken:
            wrapped = QueryFailed(f"the connection failed during the job: {describe(inner)}")
            wrapped.__cause__ = exc.orig or exc
            return wrapped
    return exc


def buffered(result: Result[*Ts]) -> Result[*Ts]:
    """Rows kept in memory (readable after the connection went back); a DML result as is
    (its rowcount stays), and so is a result with no rows at all (an ORM bulk INSERT or
    UPDATE from a list of rows), which has nothing to freeze."""
    if isinstance(result, CursorResult) and not result.returns_rows:
        result.rowcount  # noqa: B018 - read (and memoized) while the cursor is still open
        return result
    if getattr(result._metadata, "returns_rows", True) is False:
        return result
    return result.freeze()()


def is_core(statement: Executable) -> bool:
    """Whether ``statement`` is plain Core (``text()``, a table's ``select``/``insert``...),
    which a connection runs as well as a Session; an ORM statement (``select(User)``) needs
    the Session to return entities. (The attribute is the one Session itself consults; if a
    SQLAlchemy ever lacks it, everything goes through a Session, as before.)"""
    attrs = getattr(statement, "_propagate_attrs", None)
    return isinstance(attrs, Mapping) and attrs.get("compile_state_plugin") is None


class Alone:
    """A job's work of one Core statement, run on a connection (not a Session)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, conn: Any, _job: Job) -> Any:
        return self.fn(conn)


def unfinished(core: Core, job: Job, exc: Exception) -> None:
    """A job's task or thread failed outside its attempt (closing its connection, say): log
    it, and if the job never got an outcome, fail it, so that its caller never takes a
    missing result for a NULL."""
    log.exception("a job's connection or session failed outside the job")
    if job.state == _core.State.CONNECTING:
        core.no_connection(job, _core.no_connection_error(exc, 0.0))


def ignore_job(fn: Callable[[Any], Any]) -> Callable[[Any, Job], Any]:
    """The runners' work takes ``(conn, job)``; a user's ``fn`` takes the session only."""
    return lambda session, job: fn(session)
