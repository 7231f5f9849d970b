"""Per-key concurrency limits across a fleet, and the seed's bounded log query in one call.

``KeyedLimiter``: at most ``max_per_key`` holders of a key at once, across every process that
shares the backend. A slot is a lease: a holder renews it while it holds it, so a holder that
dies (``kill -9``, a lost host) frees its slot when the lease ends, never later.

``bounded``: the query shape seed 002 shipped after its outage ("Bounded log queries"): a
read-only transaction (a write fails in PostgreSQL), ``SET LOCAL statement_timeout`` and
``lock_timeout``, at most ``max_rows`` rows (fetched through a server-side cursor, so the
server never produces more), inside a limiter's slot for the caller's key.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Literal, Protocol, TypeVar, get_args

import psycopg
from psycopg.abc import Params, Query

from pgsteady import _checks
from pgsteady.errors import CacheUnavailable, CircuitOpen, LimitExceeded, UsageError
from pgsteady.guards._quiet import QuietLog
from pgsteady.guards.backends import Backend, MemoryBackend
from pgsteady.settings import Duration, pg_interval, to_seconds

T = TypeVar("T")


class Queryable(Protocol):
    """What :func:`bounded` needs of a database: ``run(fn, deadline=...)`` calling ``fn`` with
    a connection (``pgsteady.Database`` is one). Guards know no runner: the arrow points down."""

    def run(self, fn: Callable[[psycopg.Connection[Any]], T], *,
            deadline: float | None) -> T: ...


class AsyncQueryable(Protocol):
    """:class:`Queryable` for asyncio (``pgsteady.AsyncDatabase`` is one)."""

    async def run(self, fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]], *,
                  deadline: float | None) -> T: ...

log = logging.getLogger("pgsteady.guards")

_FIRST_PAUSE = 0.002
_MAX_PAUSE = 0.05

OnBackendError = Literal["raise", "open", "closed"]
"""What a hold does when the backend (Redis) fails or its breaker is open: ``raise``
:class:`CacheUnavailable`; ``open``: run the block without a slot (the limit is not enforced
until Redis answers); ``closed``: refuse with :class:`LimitExceeded` (no slot can be proven
free), its ``__cause__`` the :class:`CacheUnavailable`."""


def _holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class _Limits:
    """What both limiters share: arguments, the wait's pacing, the error."""

    def __init__(self, max_per_key: int, backend: Backend | None, lease: Duration,
                 on_backend_error: OnBackendError) -> None:
        _checks.whole(max_per_key, "max_per_key")
        if on_backend_error not in get_args(OnBackendError):
            raise UsageError(f"on_backend_error must be 'raise', 'open' or 'closed', got "
                             f"{on_backend_error!r}")
        self.on_backend_error = on_backend_error
        self.quiet = QuietLog(log)
        if backend is not None and not isinstance(backend, Backend):
            raise UsageError(f"backend must be a MemoryBackend, a RedisBackend or None, got "
                             f"{type(backend).__name__} {backend!r}")
        seconds = to_seconds(lease, "lease")
        if not seconds:
            raise UsageError("lease must be a positive duration: it is how long a dead "
                             "holder keeps its slot")
        self.max_per_key = max_per_key
        self.backend: Backend = backend if backend is not None else MemoryBackend()
        self.lease = seconds
        self.typical_hold: float | None = None  # moving average of this process's holds

    def held_for(self, seconds: float) -> None:
        """Learn how long holds last: the best guess of when a slot frees."""
        last = self.typical_hold
        self.typical_hold = seconds if last is None else 0.8 * last + 0.2 * seconds

    def refused(self, key: str, lease_left: float) -> LimitExceeded:
        """The error for a refused hold; ``retry_after`` is when a slot likely frees: the
        typical hold here, but never later than the earliest lease ends."""
        guess = lease_left if self.typical_hold is None else min(lease_left, self.typical_hold)
        return LimitExceeded(key, self.max_per_key, max(0.001, guess))

    def pauses(self, wait: float) -> Iterator[float]:
        """Jittered pauses between tries, growing to 50 ms, summing to at most ``wait``."""
        end = time.monotonic() + wait
        pause = _FIRST_PAUSE
        while (left := end - time.monotonic()) > 0:
            yield min(left, pause * random.uniform(0.5, 1.0))
            pause = min(_MAX_PAUSE, pause * 2)

    def backend_failed(self, key: str, exc: CacheUnavailable) -> None:
        """Apply ``on_backend_error`` to a failed acquire: return to run the block without
        a slot, or raise."""
        if self.on_backend_error == "raise":
            raise exc
        self.quiet.note(f"backend-{self.on_backend_error}", logging.WARNING,
                        "limiter backend unavailable; holds of %r and others are %s: %s", key,
                        "let through without a slot" if self.on_backend_error == "open"
                        else "refused", str(exc))
        if self.on_backend_error == "open":
            return
        breaker = getattr(self.backend, "breaker", None)
        retry_after = exc.__cause__.retry_after if isinstance(exc.__cause__, CircuitOpen) \
            else breaker.stats().retry_after if breaker is not None else 0.0
        raise LimitExceeded(key, self.max_per_key, max(0.001, retry_after)) from exc

    def wait_of(self, wait: Duration) -> float:
        seconds = to_seconds(wait, "wait")
        return 0.0 if seconds is None else seconds


class KeyedLimiter:
    """``with limiter.hold("org:42", wait=0.1):`` — at most ``max_per_key`` holders per key.

    With :class:`MemoryBackend` (the default) the limit holds within this process; with
    :class:`RedisBackend` across every process using that Redis. Leases last ``lease``
    seconds and are renewed every third of that while held, by one background thread per
    limiter that exits once a renewal round finds nothing held.

    When Redis fails or does not answer, ``on_backend_error`` decides (see
    :data:`OnBackendError`): ``"raise"`` (the default) raises :class:`CacheUnavailable`,
    which a web app must map (503) or it becomes a 500; ``"open"`` runs the block unlimited;
    ``"closed"`` raises :class:`LimitExceeded`. The backend's breaker makes a hung Redis cost
    one timeout per outage and probe, not one per hold.
    """

    def __init__(self, max_per_key: int, *, backend: Backend | None = None,
                 lease: Duration = 30.0, on_backend_error: OnBackendError = "raise") -> None:
        self._limits = _Limits(max_per_key, backend, lease, on_backend_error)
        self.max_per_key = max_per_key
        self.backend = self._limits.backend
        self.lease = self._limits.lease
        self._held: dict[str, str] = {}  # holder -> key
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._renewer: threading.Thread | None = None

    def close(self) -> None:
        """Stop renewing (held slots then end with their leases)."""
        self._stopping.set()

    @contextlib.contextmanager
    def hold(self, key: str, wait: Duration = 0.1) -> Iterator[None]:
        """Hold one of ``key``'s slots for the block; :class:`LimitExceeded` if none frees
        within ``wait`` seconds."""
        try:
            holder: str | None = self._acquire(key, self._limits.wait_of(wait))
        except CacheUnavailable as exc:
            self._limits.backend_failed(key, exc)
            holder = None
        if holder is None:  # on_backend_error="open": no slot to renew or release
            yield
            return
        start = time.monotonic()
        try:
            yield
        finally:
            self._limits.held_for(time.monotonic() - start)
            self._release(key, holder)

    def _acquire(self, key: str, wait: float) -> str:
        holder = _holder_id()
        limits = self._limits
        retry_after = self.backend.acquire(key, holder, limits.max_per_key, limits.lease)
        if retry_after is not None:
            for pause in limits.pauses(wait):
                time.sleep(pause)
                retry_after = self.backend.acquire(key, holder, limits.max_per_key, limits.lease)
                if retry_after is None:
                    break
            else:
                raise limits.refused(key, retry_after)
        with self._lock:
            self._held[holder] = key
            if self._renewer is None:
                self._renewer = threading.Thread(target=self._renew, daemon=True,
                                                 name="pgsteady-limiter-renew")
                self._renewer.start()
        return holder

    def _release(self, key: str, holder: str) -> None:
        with self._lock:
            self._held.pop(holder, None)
        try:
            self.backend.release(key, holder)
        except CacheUnavailable as exc:  # the lease ends by itself
            log.warning("could not release a slot of %r (it frees when its lease ends): %s",
                        key, exc)

    def _renew(self) -> None:
        """Renew every held lease each third of a lease; exit once nothing is held (a thread
        per hold would cost more than the hold)."""
        while True:
            stopping = self._stopping.wait(self.lease / 3)
            with self._lock:
                held = list(self._held.items())
                if not held or stopping:
                    self._renewer = None
                    return
            for holder, key in held:
                try:
                    if not self.backend.renew(key, holder, self.lease):
                        log.warning("a slot of %r was lost (its lease ended before renewal); "
                                    "the limit may be exceeded briefly", key)
                        with self._lock:
                            self._held.pop(holder, None)  # warn once, not every round
                except CacheUnavailable as exc:
                    log.warning("could not renew a slot of %r: %s", key, exc)


class AsyncKeyedLimiter:
    """:class:`KeyedLimiter` for asyncio: ``async with limiter.hold(key, wait=0.1):``; each
    hold renews its own lease in a task. ``on_backend_error`` as for :class:`KeyedLimiter`."""

    def __init__(self, max_per_key: int, *, backend: Backend | None = None,
                 lease: Duration = 30.0, on_backend_error: OnBackendError = "raise") -> None:
        self._limits = _Limits(max_per_key, backend, lease, on_backend_error)
        self.max_per_key = max_per_key
        self.backend = self._limits.backend
        self.lease = self._limits.lease

    @contextlib.asynccontextmanager
    async def hold(self, key: str, wait: Duration = 0.1) -> AsyncIterator[None]:
        limits = self._limits
        try:
            holder: str | None = await self._acquire(key, limits.wait_of(wait))
        except CacheUnavailable as exc:
            limits.backend_failed(key, exc)
            holder = None
        if holder is None:  # on_backend_error="open": no slot to renew or release
            yield
            return
        renewer = asyncio.ensure_future(self._renew(key, holder))
        start = time.monotonic()
        try:
            yield
        finally:
            limits.held_for(time.monotonic() - start)
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            try:
                await self.backend.arelease(key, holder)
            except CacheUnavailable as exc:
                log.warning("could not release a slot of %r (it frees when its lease "
                            "ends): %s", key, exc)

    async def _acquire(self, key: str, wait: float) -> str:
        limits = self._limits
        holder = _holder_id()
        retry_after = await self.backend.aacquire(key, holder, limits.max_per_key, limits.lease)
        if retry_after is not None:
            for pause in limits.pauses(wait):
                await asyncio.sleep(pause)
                retry_after = await self.backend.aacquire(key, holder, limits.max_per_key,
                                                          limits.lease)
                if retry_after is None:
                    break
            else:
                raise limits.refused(key, retry_after)
        return holder

    async def _renew(self, key: str, holder: str) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                if not await self.backend.arenew(key, holder, self.lease):
                    log.warning("a slot of %r was lost before renewal", key)
                    return
            except CacheUnavailable as exc:
                log.warning("could not renew a slot of %r: %s", key, exc)


# -- bounded queries ------------------------------------------------------------------------

_READ_ONLY = "SET TRANSACTION READ ONLY"
_TIMEOUTS = ("SELECT set_config('statement_timeout', %s, true), "
             "set_config('lock_timeout', %s, true)")
_PLACEHOLDER = re.compile(r"%(\(\w+\))?[sbt]")


class Rows(list[Any]):
    """The rows of a bounded query; ``truncated`` says more rows were there."""

    truncated: bool = False


@functools.lru_cache(maxsize=256)
def _is_plain_select(text: str) -> bool:
    """Whether a server-side cursor can run ``text``: one SELECT without writes in a WITH.
    Anything else runs as a plain statement (where a write then fails read-only)."""
    try:
        from pglast import ast, parse_sql  # noqa: PLC0415 - pglast loads in ~50 ms
    except ImportError:  # the core install: pglast comes with an extra (cli)
        return _starts_one_select(text)
    try:
        statements = parse_sql(_PLACEHOLDER.sub("$1", text).replace("%%", "%"))
    except Exception:  # let the server report what is wrong with it
        return False
    if len(statements) != 1 or not isinstance(statements[0].stmt, ast.SelectStmt):
        return False
    with_clause = statements[0].stmt.withClause
    ctes = with_clause.ctes if with_clause is not None else ()
    return all(isinstance(cte.ctequery, ast.SelectStmt) for cte in ctes or ())


def _starts_one_select(text: str) -> bool:
    """Without a parser: one statement, and its first word is SELECT (a WITH may hold a
    write, so it runs as a plain statement). A SELECT that still writes (``INTO``, ``FOR
    UPDATE``) fails in the read-only transaction either way."""
    from pgsteady.sql import text as sqltext  # noqa: PLC0415 - only without pglast

    statements = [c.text for c in sqltext.split(text)
                  if sqltext.skip_blanks(c.text) < len(c.text)]
    if len(statements) != 1:
        return False
    body = statements[0]
    start = sqltext.skip_blanks(body)
    return re.match(r"select\b", body[start:start + 7], re.IGNORECASE) is not None


class _Bounds:
    """The arguments of one bounded query, checked once."""

    def __init__(self, query: Query, params: Params | None, *, key: str | None, limiter: Any,
                 statement_timeout: Duration, lock_timeout: Duration, max_rows: int,
                 deadline: Duration, wait: Duration) -> None:
        if limiter is not None and key is None:
            raise UsageError("bounded(): a limiter needs a key (e.g. key=f'org:{org_id}')")
        _checks.whole(max_rows, "max_rows")
        self.query: Any = query
        self.params, self.key, self.max_rows = params, key, max_rows
        self.timeouts = (pg_interval(to_seconds(statement_timeout, "statement_timeout")),
                         pg_interval(to_seconds(lock_timeout, "lock_timeout")))
        budget = to_seconds(deadline, "deadline")
        self.until = None if budget is None else time.monotonic() + budget
        chosen = to_seconds(wait, "wait")
        self.wait = chosen if chosen is not None else (0.1 if budget is None else budget)

    def slot_wait(self) -> float:
        left = self.left()
        return self.wait if left is None else min(self.wait, left)

    def left(self) -> float | None:
        return None if self.until is None else max(0.0, self.until - time.monotonic())

    def text(self, conn: Any) -> str:
        if isinstance(self.query, str | bytes):
            return self.query if isinstance(self.query, str) else self.query.decode()
        return str(self.query.as_string(conn))

    def rows(self, fetched: list[Any]) -> Rows:
        rows = Rows(fetched[:self.max_rows])
        rows.truncated = len(fetched) > self.max_rows
        if rows.truncated:
            log.debug("bounded query stopped at max_rows=%d", self.max_rows)
        return rows


def bounded(db: Queryable, query: Query, params: Params | None = None, *,
            key: str | None = None, limiter: KeyedLimiter | None = None,
            statement_timeout: Duration = 5.0, lock_timeout: Duration = 1.0,
            max_rows: int = 1000, deadline: Duration = None, wait: Duration = None) -> Rows:
    """Run one read-only query with short timeouts and a row cap, in ``limiter``'s slot for
    ``key``. ``deadline`` covers the wait for a slot and the query; ``wait`` (default: up to
    the deadline, or 0.1 s without one) bounds the wait for a slot alone."""
    if not callable(getattr(db, "run", None)):
        raise UsageError(f"bounded() needs a Database, got {type(db).__name__} {db!r}")
    bounds = _Bounds(query, params, key=key, limiter=limiter,
                     statement_timeout=statement_timeout, lock_timeout=lock_timeout,
                     max_rows=max_rows, deadline=deadline, wait=wait)

    def work(conn: psycopg.Connection[Any]) -> Rows:
        conn.execute(_READ_ONLY)
        conn.execute(_TIMEOUTS, bounds.timeouts)
        if _is_plain_select(bounds.text(conn)):
            with conn.cursor(name=f"pgsteady_bounded_{uuid.uuid4().hex[:8]}") as cur:
                cur.execute(bounds.query, bounds.params)
                return bounds.rows(cur.fetchmany(bounds.max_rows + 1))
        plain = conn.execute(bounds.query, bounds.params)
        return bounds.rows(plain.fetchmany(bounds.max_rows + 1) if plain.description else [])

    if limiter is None:
        return db.run(work, deadline=bounds.left())
    assert bounds.key is not None
    with limiter.hold(bounds.key, wait=bounds.slot_wait()):
        return db.run(work, deadline=bounds.left())


async def abounded(db: AsyncQueryable, query: Query, params: Params | None = None, *,
                   key: str | None = None, limiter: AsyncKeyedLimiter | None = None,
                   statement_timeout: Duration = 5.0, lock_timeout: Duration = 1.0,
                   max_rows: int = 1000, deadline: Duration = None,
                   wait: Duration = None) -> Rows:
    """:func:`bounded` for :class:`AsyncDatabase` and :class:`AsyncKeyedLimiter`."""
    bounds = _Bounds(query, params, key=key, limiter=limiter,
                     statement_timeout=statement_timeout, lock_timeout=lock_timeout,
                     max_rows=max_rows, deadline=deadline, wait=wait)

    async def work(conn: psycopg.AsyncConnection[Any]) -> Rows:
        await conn.execute(_READ_ONLY)
        await conn.execute(_TIMEOUTS, bounds.timeouts)
        if _is_plain_select(bounds.text(conn)):
            async with conn.cursor(name=f"pgsteady_bounded_{uuid.uuid4().hex[:8]}") as cur:
                await cur.execute(bounds.query, bounds.params)
                return bounds.rows(await cur.fetchmany(bounds.max_rows + 1))
        plain = await conn.execute(bounds.query, bounds.params)
        return bounds.rows(await plain.fetchmany(bounds.max_rows + 1) if plain.description
                           else [])

    if limiter is None:
        return await db.run(work, deadline=bounds.left())
    assert bounds.key is not None
    async with limiter.hold(bounds.key, wait=bounds.slot_wait()):
        return await db.run(work, deadline=bounds.left())

