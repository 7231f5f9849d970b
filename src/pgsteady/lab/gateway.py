"""A miniature LLM gateway (seed 002), run by uvicorn as one replica process per port.

Endpoints, as the seed's gateway and dashboard have them:

``/v1/complete?org=N``      reads the organization's settings: from the replica's in-process
                            cache for the hot keys (ids up to ``hot_keys``), from ``orgs``
                            otherwise — the "requests that needed a database lookup".
``/dashboard/logs?org=N``   the request-log query, joined to ``orgs``; ``&hold=S`` is the bad
                            plan that walks the whole log and keeps ``orgs`` locked S seconds.
probes                      ``naive``: ``/health`` queries ``orgs`` (liveness) and ``/ping``
                            answers when the process serves (readiness). ``steady``:
                            ``/health/live`` never does I/O, ``/health/ready`` checks the
                            database with a short deadline (:mod:`pgsteady.health`).

The two strategies differ only in the choices the seed lists. ``naive``: a plain psycopg pool,
no timeouts, lookups wait as long as the client does, the new version migrates at start-up
before it serves. ``steady``: :class:`pgsteady.AsyncDatabase` (labelled sessions, timeouts, a
circuit breaker), lookups through :class:`pgsteady.guards.AsyncStaleCache`, the log query
through :func:`pgsteady.guards.abounded`.

The replica's configuration comes as JSON in ``$PGSTEADY_GATEWAY``; ``python -m
pgsteady.lab.gateway`` runs one. Nothing here prints; uvicorn logs to the replica's log file.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import parse_qs

import psycopg
from psycopg_pool import AsyncConnectionPool

from pgsteady._extras import require
from pgsteady.arunner import AsyncDatabase
from pgsteady.errors import PgsteadyError
from pgsteady.guards import AsyncStaleCache, CircuitBreaker, MemoryBackend, abounded
from pgsteady.health import Health, breaker_check, db_check

log = logging.getLogger("pgsteady.lab.gateway")

ENV = "PGSTEADY_GATEWAY"

# The gateway's SQL, in one place.
LOOKUP = "SELECT id, name, settings FROM orgs WHERE id = %s"
PRELOAD = "SELECT id, name, settings FROM orgs WHERE id <= %s"
RECENT_LOGS = ("SELECT l.id, l.status, o.name FROM request_log l JOIN orgs o ON o.id = l.org_id "
               "WHERE l.org_id = %s ORDER BY l.id DESC LIMIT 20")
# The bad plan: every row of the log, newest first, joined to orgs; pg_sleep stands in for the
# hours such a walk took in the seed (the locks on both tables are held from the start).
WHOLE_LOG_SCAN = ("SELECT count(*) FROM request_log l JOIN orgs o ON o.id = l.org_id, "
                  "pg_sleep(%s)")
NAIVE_HEALTH = "SELECT count(*) FROM orgs WHERE id = 1"
MIGRATION = "ALTER TABLE orgs ADD COLUMN IF NOT EXISTS region text"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class GatewayConfig:
    """One replica: who it is, where it listens, what it connects to, how it behaves."""

    name: str
    port: int
    dsn: str
    strategy: str = "naive"
    version: int = 1
    migrate_on_start: bool = False
    pool_size: int = 10
    hot_keys: int = 100
    client_timeout: float = 10.0      # naive: a lookup waits as long as the client does
    lookup_deadline: float = 2.0      # steady: a lookup's deadline
    log_statement_timeout: float = 5.0
    ready_deadline: float = 1.0

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> GatewayConfig:
        return cls(**json.loads(os.environ[ENV]))


class Unavailable(Exception):
    """The replica could not answer; becomes a 503."""


class Gateway:
    """The ASGI app of one replica."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.hot: dict[int, dict[str, Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self.db: AsyncDatabase | None = None
        self.cache: AsyncStaleCache | None = None
        self.health: Health | None = None
        self.probes: Callable[[Scope, Receive, Send], Awaitable[None]] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    async def startup(self) -> None:
        c = self.config
        label = f"gateway-{c.name}-v{c.version}"
        if c.strategy == "naive":
            # No timeouts anywhere, no label: what the seed's services had.
            self.pool = AsyncConnectionPool(c.dsn, min_size=1, max_size=c.pool_size,
                                            timeout=c.client_timeout, open=False,
                                            kwargs={"autocommit": True})
            await self.pool.open(wait=False)
        else:
            # Deadlines that pass while a call waits or runs count against the breaker; the
            # statement's own errors (the log query's statement_timeout) do not.
            breaker = CircuitBreaker(f"postgres@{c.name}", failure_rate=0.5, min_calls=10,
                                     window=10.0, open_for=2.0)
            self.db = AsyncDatabase(c.dsn, pool_size=c.pool_size, service=label,
                                    statement_timeout=30.0, lock_timeout=2.0,
                                    idle_in_transaction_timeout=10.0,
                                    max_waiting=c.pool_size * 20, breaker=breaker)
            await self.db.open()
            self.cache = AsyncStaleCache(MemoryBackend(max_entries=50_000), fresh_for=30.0,
                                         stale_for=3600.0)
            self.health = Health({"postgres": db_check(self.db),
                                  "breaker": breaker_check(breaker)},
                                 timeout=c.ready_deadline, service=label, version=str(c.version))
            self.probes = self.health.asgi()
        self._spawn(self._preload())

    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.pool is not None:
            await self.pool.close(timeout=2)
        if self.db is not None:
            await self.db.close(timeout=2)
        if self.health is not None:
            self.health.close()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _preload(self) -> None:
        """Warm the hot keys in the background; a replica serves before its cache is warm."""
        for _ in range(100):  # bounded: give up after ~100 tries
            try:
                rows = await self._fetchall(PRELOAD, (self.config.hot_keys,),
                                            self.config.client_timeout)
            except (PgsteadyError, psycopg.Error, Unavailable, TimeoutError):
                await asyncio.sleep(0.5)
                continue
            for row in rows:
                entry = _org(row)
                if self.cache is not None:
                    await self.cache.get_or_load(str(row[0]), functools.partial(_value, entry))
                else:
                    self.hot[row[0]] = entry
            return

    # -- database access ---------------------------------------------------------------------

    async def _fetchall(self, query: str, params: tuple[Any, ...], wait: float) -> list[Any]:
        if self.db is not None:
            return await self.db.fetchall(query, params, deadline=wait)
        assert self.pool is not None
        async with self.pool.connection() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall()

    async def lookup(self, org: int) -> dict[str, Any]:
        c = self.config
        if self.cache is not None:
            async def load() -> dict[str, Any]:
                rows = await self._fetchall(LOOKUP, (org,), c.lookup_deadline)
                if not rows:
                    raise Unavailable(f"no organization {org}")
                return _org(rows[0])

            found: dict[str, Any] = await self.cache.get_or_load(str(org), load)
            return found
        if org in self.hot:
            return self.hot[org]
        rows = await self._fetchall(LOOKUP, (org,), c.client_timeout)
        if not rows:
            raise Unavailable(f"no organization {org}")
        entry = _org(rows[0])
        if org <= c.hot_keys:
            self.hot[org] = entry
        return entry

    async def logs(self, org: int, hold: float) -> dict[str, Any]:
        query, params = (WHOLE_LOG_SCAN, (hold,)) if hold > 0 else (RECENT_LOGS, (org,))
        if self.db is not None:
            rows: list[Any] = await abounded(
                self.db, query, params, statement_timeout=self.config.log_statement_timeout,
                max_rows=100)
        else:
            rows = await self._fetchall(query, params, self.config.client_timeout)
        return {"org": org, "rows": len(rows)}

    async def naive_health(self) -> dict[str, Any]:
        rows = await self._fetchall(NAIVE_HEALTH, (), self.config.client_timeout)
        return {"status": "pass", "orgs": rows[0][0] if rows else 0}

    # -- ASGI --------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        query = parse_qs(scope.get("query_string", b"").decode())
        org = _int(query.get("org", ["1"])[0])
        path = scope["path"]
        routes: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
            "/v1/complete": lambda: self.lookup(org),
            "/dashboard/logs": lambda: self.logs(org, _float(query.get("hold", ["0"])[0])),
        }
        if self.probes is not None and path.startswith("/health/"):
            await self.probes(scope, receive, send)  # pgsteady.health: live, ready, deep
            return
        if self.config.strategy == "naive":
            routes["/health"] = self.naive_health
            routes["/ping"] = _pass
        handler = routes.get(path)
        if handler is None:
            await _respond(send, 404, {"error": f"no route {path}"})
            return
        try:
            body = await handler()
        except (PgsteadyError, psycopg.Error, Unavailable, TimeoutError) as exc:
            await _respond(send, 503, {"error": type(exc).__name__})
            return
        await _respond(send, 200, body)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.startup()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _value(value: dict[str, Any]) -> dict[str, Any]:
    return value


async def _pass() -> dict[str, Any]:
    return {"status": "pass"}


def _org(row: Any) -> dict[str, Any]:
    return {"id": row[0], "name": row[1], "settings": row[2]}


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 1


def _float(text: str) -> float:
    try:
        return max(0.0, float(text))
    except ValueError:
        return 0.0


async def _respond(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body, default=str).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


def migrate_on_start(config: GatewayConfig) -> None:
    """What the seed's API servers did: run the pending migration before serving, no timeout."""
    with psycopg.connect(config.dsn, autocommit=True) as conn:
        conn.execute(MIGRATION)


def main() -> None:
    uvicorn = require("uvicorn", extra="lab", feature="the lock-queue lab's API replicas")

    config = GatewayConfig.from_env()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    if config.migrate_on_start:
        started = time.monotonic()
        migrate_on_start(config)
        log.warning("migration applied in %.1f s", time.monotonic() - started)
    uvicorn.run(Gateway(config), host="127.0.0.1", port=config.port, log_level="warning",
                access_log=False, lifespan="on", timeout_graceful_shutdown=2)


if __name__ == "__main__":
    main()
