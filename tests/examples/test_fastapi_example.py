"""examples/fastapi drives real PostgreSQL through PgBouncer (transaction mode) over HTTP."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType

import httpx
import psycopg
import pytest
from fastapi import FastAPI

from pgsteady.guards import CircuitBreaker

APP = Path(__file__).resolve().parents[2] / "examples" / "fastapi" / "app.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fastapi_example", APP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # SQLAlchemy resolves the models' annotations there
    spec.loader.exec_module(module)
    return module


@asynccontextmanager
async def _client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan running, and an httpx client speaking ASGI to it."""
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://shop") as client:
        yield client


@pytest.fixture
def shop(pgsteady_stack, pgsteady_database):
    """The example's table with two products, and the PgBouncer DSN in front of it."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table products (id int primary key, name text not null, "
                     "price_cents int not null)")
        conn.execute("insert into products values (1, 'kettle', 2500), (2, 'mug', 800)")
    cluster = pgsteady_stack(pool_size=2, pool_mode="transaction")
    return cluster.pooled_dsn(pgsteady_database.name), pgsteady_database.dsn


def _price(dsn: str, product_id: int) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("select price_cents from products where id = %s",
                            (product_id,)).fetchone()[0]


def _row_locked(dsn: str, product_id: int, release: threading.Event) -> threading.Thread:
    """Hold a row lock in another session until ``release`` is set."""
    locked = threading.Event()

    def hold() -> None:
        with psycopg.connect(dsn) as conn:
            conn.execute("select 1 from products where id = %s for update", (product_id,))
            locked.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert locked.wait(5)
    return thread


def test_lookups_writes_and_health(shop):
    """A cached lookup, a committed write, 404s, and the health probes under /ops."""
    pooled, direct = shop

    async def scenario() -> None:
        async with _client(_example().create_app(pooled)) as client:
            assert (await client.get("/products/1")).json() == \
                {"id": 1, "name": "kettle", "price_cents": 2500, "stale": False}
            assert (await client.get("/products/9")).status_code == 404
            changed = await client.put("/products/2/price", params={"price_cents": 900})
            assert changed.status_code == 200
            assert _price(direct, 2) == 900
            assert (await client.get("/products/2")).json()["price_cents"] == 900  # invalidated
            missing = await client.put("/products/9/price", params={"price_cents": 1})
            assert missing.status_code == 404
            for probe in ("live", "ready", "deep"):
                response = await client.get(f"/ops/health/{probe}")
                assert response.status_code == 200, response.text
                assert response.json()["status"] == "pass"

    asyncio.run(scenario())


def test_deadline_is_504_and_the_write_still_commits(shop):
    """A write stuck behind a row lock answers 504 (phase running) at its deadline, then
    commits once the lock is released."""
    pooled, direct = shop
    release = threading.Event()

    async def scenario() -> None:
        async with _client(_example().create_app(pooled, deadline=0.2)) as client:
            holder = _row_locked(direct, 1, release)
            response = await client.put("/products/1/price", params={"price_cents": 1})
            assert response.status_code == 504
            assert response.json()["phase"] == "running"
            release.set()
            holder.join(10)
            end = time.monotonic() + 10
            while _price(direct, 1) != 1 and time.monotonic() < end:
                await asyncio.sleep(0.05)

    asyncio.run(scenario())
    assert _price(direct, 1) == 1


def test_overloaded_and_open_circuit_are_503_with_retry_after(shop):
    """A full backlog fails fast (503, Retry-After: 1); after repeated deadlines the breaker
    opens: writes get 503 with Retry-After, lookups are served stale, ready fails."""
    pooled, direct = shop
    breaker = CircuitBreaker("shop-db", min_calls=2, failure_rate=0.5, open_for=30)
    app = _example().create_app(pooled, pool_size=1, max_waiting=1, deadline=1.0,
                                breaker=breaker)
    release = threading.Event()

    async def scenario() -> None:
        async with _client(app) as client:
            assert (await client.get("/products/2")).status_code == 200  # cached
            holder = _row_locked(direct, 1, release)
            # One write runs into the lock, one waits for the only slot, the third is refused.
            stuck = [asyncio.create_task(client.put("/products/1/price",
                                                    params={"price_cents": 5}))]
            await asyncio.sleep(0.2)
            stuck.append(asyncio.create_task(client.put("/products/1/price",
                                                        params={"price_cents": 5})))
            await asyncio.sleep(0.2)
            response = await client.put("/products/1/price", params={"price_cents": 6})
            assert response.status_code == 503
            assert response.headers["retry-after"] == "1"
            assert [r.status_code for r in await asyncio.gather(*stuck)] == [504, 504]
            response = await client.put("/products/1/price", params={"price_cents": 7})
            assert response.status_code == 503  # two deadlines: the breaker is open
            assert "open" in response.json()["detail"]
            assert int(response.headers["retry-after"]) >= 1
            await asyncio.sleep(2.1)  # the cached entry turns stale: served while open
            assert (await client.get("/products/2")).json()["stale"] is True
            assert (await client.get("/ops/health/ready")).status_code == 503
            assert (await client.get("/ops/health/live")).status_code == 200
            release.set()
            holder.join(10)

    asyncio.run(scenario())
