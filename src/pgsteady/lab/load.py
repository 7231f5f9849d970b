"""The load driver: closed-loop workers, each strategy a faithful model of one client.

Every worker runs back-to-back queries (closed loop, as in the pool-drain outage told in
docs/outages.md) from its start to its stop time and records, in whole seconds since the run
began, whether its caller got an answer within the deadline, timed out, or was rejected.
What the database actually finished is counted elsewhere, on the server.

Strategies — what each does when the deadline passes:

``naive``    pgx's default: send a CancelRequest and close the connection; reconnect for the
             next query. Behind PgBouncer the cancel is dropped if the query is still queued,
             and the close destroys the server connection it is later given ("not ready").
``cancel``   pgx's ``CancelRequestContextWatcherHandler``: send a CancelRequest at the
             deadline, keep waiting up to ``cancel_delay`` more, then close.
``psycopg``  psycopg's own behaviour: send a cancel and keep waiting for the result, however
             long it takes (the caller is late, but no connection is lost).
``steady``   :class:`pgsteady.Database` with a pool ``overcommit`` connections larger than
             PgBouncer's, each caller a thread (as in a threaded server): the caller stops
             waiting at the deadline, the query finishes on its connection. The extra client
             connections only ever wait inside PgBouncer — nothing closes them on a deadline —
             so they keep every server connection busy instead of idle between jobs.
``steady-async``  the same with :class:`pgsteady.AsyncDatabase`, callers as tasks.
``sqlalchemy``  a plain ``AsyncEngine`` (postgresql+psycopg, SQLAlchemy's default pool of 5
             + 10 overflow) with ``asyncio.timeout(deadline)`` around each query, as FastAPI
             code is written: the timeout cancels the query mid-flight and SQLAlchemy then
             closes that connection, which PgBouncer may already have linked to a server.
``sqlalchemy-steady``  :class:`pgsteady.sqlalchemy.AsyncSteady` over an ``AsyncEngine`` with
             ``overcommit`` connections more than PgBouncer's pool, callers as tasks.

The first three speak the wire protocol directly (:mod:`pgsteady.lab.wire`) so that the
socket does exactly what those drivers do; all run on one asyncio loop, which keeps a
collapse's thousands of reconnects per second from making the driver the bottleneck.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.conninfo import make_conninfo

from pgsteady.arunner import AsyncDatabase
from pgsteady.errors import DeadlineExceeded, Overloaded, PgsteadyError, UsageError
from pgsteady.lab._auth import read_passfile
from pgsteady.lab.wire import WireConnection, WireError
from pgsteady.runner import Database

if TYPE_CHECKING:  # the sqlalchemy strategies import it when they run (an optional extra)
    from sqlalchemy.ext.asyncio import AsyncEngine

    from pgsteady.sqlalchemy import AsyncSteady

STRATEGIES = ("naive", "cancel", "psycopg", "steady", "steady-async", "sqlalchemy",
              "sqlalchemy-steady")
SQLALCHEMY_POOL = {"pool_size": 5, "max_overflow": 10}  # create_async_engine's defaults
_SOCKET_ERRORS = (OSError, asyncio.IncompleteReadError, WireError)


@dataclass(frozen=True)
class Target:
    """Where the workers send their query and how long each caller waits."""

    host: str
    port: int
    dbname: str
    user: str
    query: str
    deadline: float
    pool_size: int
    cancel_delay: float = 0.1
    passfile: str | None = None  # the lab's libpq passfile: where the password is
    overcommit: int = 0   # steady's client connections beyond PgBouncer's pool_size

    @property
    def client_pool_size(self) -> int:
        return self.pool_size + self.overcommit

    def conninfo(self) -> str:
        params = {"passfile": self.passfile} if self.passfile else {}
        return make_conninfo("", host=self.host, port=self.port, dbname=self.dbname,
                             user=self.user, **params)


@dataclass
class Series:
    """Per-second counts of what callers saw."""

    answered: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    timeouts: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    rejected: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    errors: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))


@dataclass(frozen=True)
class Shift:
    """``workers`` workers active from ``start`` to ``stop`` seconds into the run."""

    workers: int
    start: float
    stop: float


class Driver:
    """Run one strategy's workers on the current event loop and collect a :class:`Series`."""

    def __init__(self, strategy: str, target: Target, t0: float) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}")
        self.strategy = strategy
        self.target = target
        self._password = (read_passfile(Path(target.passfile), target.user)
                          if target.passfile else None)
        self.t0 = t0
        self.series = Series()
        self.db: AsyncDatabase | None = None
        self.sync_db: Database | None = None
        self.executor: ThreadPoolExecutor | None = None
        self.sa_engine: AsyncEngine | None = None
        self.sa_steady: AsyncSteady | None = None
        self._count_lock = threading.Lock()
        # Set when the run ends early (Ctrl-C cancels the tasks; the caller threads of
        # ``steady`` cannot be cancelled and would run on to the end of the run).
        self._stopping = threading.Event()

    def _second(self) -> int:
        return int(time.monotonic() - self.t0)

    async def run(self, shifts: list[Shift]) -> Series:
        worker = {"naive": self._naive, "cancel": self._cancel, "psycopg": self._psycopg,
                  "steady": self._steady_threads, "steady-async": self._steady,
                  "sqlalchemy": self._sqlalchemy,
                  "sqlalchemy-steady": self._sqlalchemy_steady}[self.strategy]
        tasks: list[asyncio.Task[None]] = []
        try:
            t = self.target
            conninfo = t.conninfo()
            if self.strategy == "steady-async":
                self.db = AsyncDatabase(conninfo, pool_size=t.client_pool_size,
                                        pooler="transaction",
                                        service="pgsteady-lab")
                await self.db.open()
                await self.db.wait(30)
            elif self.strategy == "steady":
                self.sync_db = Database(conninfo, pool_size=t.client_pool_size,
                                        pooler="transaction",
                                        service="pgsteady-lab")
                self.sync_db.wait(30)
                self.executor = ThreadPoolExecutor(sum(s.workers for s in shifts),
                                                   thread_name_prefix="pgsteady-lab-caller")
            elif self.strategy.startswith("sqlalchemy"):
                await self._sqlalchemy_engine()
            tasks = [asyncio.create_task(self._shift_worker(worker, shift))
                     for shift in shifts for _ in range(shift.workers)]
            await asyncio.gather(*tasks)
        finally:
            self._stopping.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.db is not None:
                await self.db.close(timeout=5)
            if self.sync_db is not None:
                self.sync_db.close(timeout=5)
            if self.executor is not None:
                self.executor.shutdown(wait=True)
            if self.sa_steady is not None:
                await self.sa_steady.aclose(timeout=5)
            if self.sa_engine is not None:
                await self.sa_engine.dispose()
        return self.series

    async def _shift_worker(self, worker: Callable[[float], Awaitable[None]],
                            shift: Shift) -> None:
        delay = self.t0 + shift.start - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await worker(self.t0 + shift.stop)

    # -- wire-protocol strategies ------------------------------------------------------------

    async def _connect(self) -> WireConnection:
        t = self.target
        return await WireConnection.connect(t.host, t.port, user=t.user, dbname=t.dbname,
                                            password=self._password)

    async def _wire_worker(self, stop_at: float, on_deadline: str) -> None:
        conn: WireConnection | None = None
        try:
            while time.monotonic() < stop_at:
                if conn is None:
                    try:
                        conn = await asyncio.wait_for(self._connect(), 5)
                    except (*_SOCKET_ERRORS, TimeoutError):
                        self.series.errors[self._second()] += 1
                        await asyncio.sleep(0.05)
                        continue
                conn = await self._one_query(conn, on_deadline, stop_at)
        finally:
            if conn is not None:
                conn.close()

    async def _one_query(self, conn: WireConnection, on_deadline: str,
                         stop_at: float) -> WireConnection | None:
        """Run one query; return the connection to keep using, or None if it was closed."""
        conn.send_query(self.target.query)
        result = asyncio.ensure_future(conn.read_result())
        result.add_done_callback(_retrieved)
        try:
            await asyncio.wait_for(asyncio.shield(result), self.target.deadline)
        except TimeoutError:
            self.series.timeouts[self._second()] += 1
            return await self._past_deadline(conn, result, on_deadline, stop_at)
        except WireError:
            # An error reply (e.g. a cancel meant for another client's query: behind a
            # transaction pooler it can land on whichever query holds that server).
            self.series.errors[self._second()] += 1
            return conn
        except (OSError, asyncio.IncompleteReadError):
            self.series.errors[self._second()] += 1
            conn.close()
            return None
        self.series.answered[self._second()] += 1
        return conn

    async def _past_deadline(self, conn: WireConnection, result: asyncio.Future[Any],
                             on_deadline: str, stop_at: float) -> WireConnection | None:
        with contextlib.suppress(TimeoutError, *_SOCKET_ERRORS):
            await conn.cancel()
        if on_deadline != "close":
            # cancel: wait a little more; psycopg: wait until the run ends (bounded).
            patience = (self.target.cancel_delay if on_deadline == "cancel_then_close"
                        else max(0.0, stop_at - time.monotonic()) + 1.0)
            try:
                await asyncio.wait_for(asyncio.shield(result), patience)
            except WireError:
                return conn  # the query was cancelled: an error reply, the link is fine
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                pass
            else:
                return conn  # it finished after all: still usable
        result.cancel()
        conn.close()
        return None

    async def _naive(self, stop_at: float) -> None:
        await self._wire_worker(stop_at, "close")

    async def _cancel(self, stop_at: float) -> None:
        await self._wire_worker(stop_at, "cancel_then_close")

    async def _psycopg(self, stop_at: float) -> None:
        await self._wire_worker(stop_at, "cancel_then_wait")

    # -- pgsteady --------------------------------------------------------------------------

    async def _steady(self, stop_at: float) -> None:
        assert self.db is not None
        deadline = self.target.deadline
        while time.monotonic() < stop_at:
            try:
                await self.db.fetchone(self.target.query, deadline=deadline)
                self.series.answered[self._second()] += 1
            except DeadlineExceeded:
                self.series.timeouts[self._second()] += 1
            except Overloaded:
                self.series.rejected[self._second()] += 1
                # A rejected caller's request slot stays busy for its deadline, as a real
                # request would; retrying at once would only spin the loop.
                await asyncio.sleep(deadline)
            except (PgsteadyError, psycopg.Error, *_SOCKET_ERRORS):
                self.series.errors[self._second()] += 1
                await asyncio.sleep(0.01)

    async def _steady_threads(self, stop_at: float) -> None:
        """``pgsteady.Database`` (threads): each caller is a thread, as in a threaded server."""
        assert self.executor is not None
        await asyncio.get_running_loop().run_in_executor(self.executor, self._caller_thread,
                                                         stop_at)

    def _caller_thread(self, stop_at: float) -> None:
        assert self.sync_db is not None
        deadline = self.target.deadline
        while time.monotonic() < stop_at and not self._stopping.is_set():
            try:
                self.sync_db.fetchone(self.target.query, deadline=deadline)
                counter = self.series.answered
            except DeadlineExceeded:
                counter = self.series.timeouts
            except Overloaded:
                counter = self.series.rejected
                time.sleep(deadline)  # see _steady
            except (PgsteadyError, psycopg.Error):
                counter = self.series.errors
                time.sleep(0.01)
            with self._count_lock:
                counter[self._second()] += 1


    # -- SQLAlchemy ------------------------------------------------------------------------

    async def _sqlalchemy_engine(self) -> None:
        """The engine (and, for sqlalchemy-steady, the AsyncSteady), its client connections
        opened before the clock starts, as steady-async's are."""
        try:
            from sqlalchemy import text
            from sqlalchemy.ext.asyncio import create_async_engine

            from pgsteady.sqlalchemy import AsyncSteady, url_from_dsn
        except ImportError as exc:
            raise UsageError(f"the {self.strategy} strategy needs SQLAlchemy: pip install "
                             f"'pgsteady[sqlalchemy]' ({exc})") from None
        t = self.target
        url = url_from_dsn(t.conninfo())
        if self.strategy == "sqlalchemy":
            # Behind PgBouncer 1.18 in transaction mode psycopg must not prepare statements;
            # a service there has had to set this already.
            self.sa_engine = create_async_engine(url, connect_args={"prepare_threshold": None},
                                                 **SQLALCHEMY_POOL)
            size = SQLALCHEMY_POOL["pool_size"]
        else:
            size = t.client_pool_size
            self.sa_engine = create_async_engine(url, pool_size=size, max_overflow=0)
            self.sa_steady = AsyncSteady(self.sa_engine, pooler="transaction",
                                         service="pgsteady-lab")
        engine = self.sa_engine

        async def one() -> None:
            async with engine.connect() as conn:
                await conn.execute(text("select 1"))
                await asyncio.sleep(0.05)  # hold it: the others open their own

        await asyncio.wait_for(asyncio.gather(*(one() for _ in range(size))), 30)

    async def _sqlalchemy(self, stop_at: float) -> None:
        """A FastAPI-style handler: a session per request, ``asyncio.timeout`` around the query."""
        from sqlalchemy import text
        from sqlalchemy.exc import SQLAlchemyError
        from sqlalchemy.ext.asyncio import async_sessionmaker

        assert self.sa_engine is not None
        sessions = async_sessionmaker(self.sa_engine)
        statement = text(self.target.query)
        deadline = self.target.deadline
        while time.monotonic() < stop_at:
            try:
                async with sessions() as session:
                    async with asyncio.timeout(deadline):
                        await session.execute(statement)
                        await session.commit()
                self.series.answered[self._second()] += 1
            except TimeoutError:
                self.series.timeouts[self._second()] += 1
            except (SQLAlchemyError, psycopg.Error, *_SOCKET_ERRORS):
                self.series.errors[self._second()] += 1
                await asyncio.sleep(0.01)

    async def _sqlalchemy_steady(self, stop_at: float) -> None:
        from sqlalchemy import text
        from sqlalchemy.exc import SQLAlchemyError

        assert self.sa_steady is not None
        statement = text(self.target.query)
        deadline = self.target.deadline
        while time.monotonic() < stop_at:
            try:
                await self.sa_steady.scalar(statement, deadline=deadline)
                self.series.answered[self._second()] += 1
            except DeadlineExceeded:
                self.series.timeouts[self._second()] += 1
            except Overloaded:
                self.series.rejected[self._second()] += 1
                await asyncio.sleep(deadline)  # see _steady
            except (PgsteadyError, SQLAlchemyError, psycopg.Error, *_SOCKET_ERRORS):
                self.series.errors[self._second()] += 1
                await asyncio.sleep(0.01)


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a result as seen: a run interrupted mid-query (Ctrl-C) leaves some unawaited, and
    asyncio would print each one's error as a traceback."""
    if not future.cancelled():
        future.exception()
