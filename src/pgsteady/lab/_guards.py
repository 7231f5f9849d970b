"""The few guards the lab's steady gateway needs, private to the lab.

Stand-ins for ``pgsteady.guards`` (issue 12: ``AsyncStaleCache``, ``CircuitBreaker``,
``bounded``) with the same behaviour the lab relies on: a stale entry is served when the
loader fails and a failure is never cached; a breaker that fails fast while open; a log query
that runs read-only under its own statement_timeout. Swap for the public ones once they land.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from pgsteady.arunner import AsyncDatabase
from pgsteady.errors import PgsteadyError

T = TypeVar("T")


class CircuitOpen(PgsteadyError):
    """The breaker is open: the call was refused without touching the database."""


class StaleCache:
    """An in-process cache: fresh entries served as they are, stale ones when loading fails."""

    def __init__(self, *, fresh_for: float, stale_for: float, max_entries: int = 50_000) -> None:
        self.fresh_for = fresh_for
        self.stale_for = stale_for
        self.max_entries = max_entries
        self._entries: dict[Any, tuple[float, Any]] = {}
        self._loading: dict[Any, asyncio.Future[Any]] = {}

    def put(self, key: Any, value: Any) -> None:
        if len(self._entries) >= self.max_entries:
            self._entries.pop(next(iter(self._entries)))
        self._entries[key] = (time.monotonic(), value)

    async def get_or_load(self, key: Any, loader: Callable[[], Awaitable[T]]) -> T:
        entry = self._entries.get(key)
        now = time.monotonic()
        if entry is not None and now - entry[0] < self.fresh_for:
            value: T = entry[1]
            return value
        if key in self._loading:  # single flight: wait for the load already running
            return await asyncio.shield(self._loading[key])
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            value = await loader()
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning if nobody waits
            if entry is not None and now - entry[0] < self.stale_for:
                stale: T = entry[1]
                return stale
            raise
        finally:
            del self._loading[key]
        future.set_result(value)
        self.put(key, value)
        return value


class CircuitBreaker:
    """Closed / open / half-open over a sliding window of outcomes."""

    def __init__(self, name: str, *, failure_rate: float = 0.5, min_calls: int = 10,
                 window: float = 30.0, open_for: float = 5.0) -> None:
        self.name = name
        self.failure_rate = failure_rate
        self.min_calls = min_calls
        self.window = window
        self.open_for = open_for
        self._outcomes: deque[tuple[float, bool]] = deque(maxlen=10_000)
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> str:
        if self._opened_at is None:
            return "closed"
        return "open" if time.monotonic() - self._opened_at < self.open_for else "half-open"

    async def acall(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        state = self.state
        if state == "open" or (state == "half-open" and self._probing):
            raise CircuitOpen(f"circuit {self.name} is open")
        self._probing = state == "half-open"
        try:
            result = await fn(*args)
        except (PgsteadyError, psycopg.OperationalError):
            self._record(False)
            raise
        finally:
            self._probing = False
        self._record(True)
        return result

    def _record(self, ok: bool) -> None:
        now = time.monotonic()
        if self._opened_at is not None:  # a half-open probe decides
            self._opened_at = None if ok else now
            self._outcomes.clear()
            return
        self._outcomes.append((now, ok))
        while self._outcomes and self._outcomes[0][0] < now - self.window:
            self._outcomes.popleft()
        failed = sum(1 for _, good in self._outcomes if not good)
        if len(self._outcomes) >= self.min_calls and \
                failed / len(self._outcomes) >= self.failure_rate:
            self._opened_at = now


async def bounded(db: AsyncDatabase, query: str, params: tuple[Any, ...], *,
                  statement_timeout: float, max_rows: int) -> list[Any]:
    """A read-only transaction under its own statement_timeout, at most ``max_rows`` rows."""
    async def work(conn: psycopg.AsyncConnection[Any]) -> list[Any]:
        await conn.execute("SET TRANSACTION READ ONLY")
        await conn.execute(sql.SQL("SET LOCAL statement_timeout = {}").format(
            sql.Literal(f"{max(1, round(statement_timeout * 1000))}ms")))
        cur = await conn.execute(query, params)
        return await cur.fetchmany(max_rows)

    return await db.run(work, deadline=statement_timeout + 1.0)
