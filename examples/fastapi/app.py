"""A FastAPI service on PostgreSQL (behind PgBouncer) that a deadline storm cannot drain.

    PGSTEADY_DSN="host=... port=6432 dbname=shop user=..." uvicorn --factory app:create_app

(README.md beside this file: set-up, a database from ``pgsteady lab up``, and curl.)

- On start the lifespan creates the ``products`` table if it is missing and puts two products
  in an empty one, so the routes answer on a fresh database.
- The lifespan opens the engine and its ``AsyncSteady``, and closes both: started jobs finish
  before the engine is disposed of.
- Handlers get the ``AsyncSteady`` through ``Depends``; each call carries a deadline that ends
  only the request's wait, never the query (no connection is ever closed under PgBouncer).
- Product lookups go through an ``AsyncStaleCache``: while the database is slow or the breaker
  is open, a recent answer is served instead of an error.
- ``DeadlineExceeded`` -> 504; ``Overloaded`` and ``CircuitOpen`` -> 503 with ``Retry-After``.
- Health probes for Kubernetes from ``pgsteady.health`` under ``/ops``: live (no I/O),
  ready (``select 1`` within 0.5 s, breaker closed), deep.
"""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from pgsteady.errors import CircuitOpen, DeadlineExceeded, Overloaded
from pgsteady.guards import AsyncStaleCache, CircuitBreaker
from pgsteady.health import CONTENT_TYPE, Check, CheckResult, Health, breaker_check, status_code
from pgsteady.sqlalchemy import AsyncSteady, url_from_dsn


class Base(DeclarativeBase):
    pass


class Product(Base):
    __tablename__ = "products"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]
    price_cents: Mapped[int]


async def create_schema(session: AsyncSession) -> None:
    """The table if it is missing, and two products if it is empty (an example's data).

    ``if not exists`` makes it safe for several replicas starting at once; a real service runs
    its schema changes as their own deploy step (``pgsteady migrate``), not at start-up.
    """
    await session.execute(text(
        "create table if not exists products (id int primary key, name text not null, "
        "price_cents int not null)"))
    await session.execute(text(
        "insert into products select * from (values (1, 'kettle', 2500), (2, 'mug', 800)) v "
        "where not exists (select from products) on conflict do nothing"))


def steady_of(request: Request) -> AsyncSteady:
    """The app's AsyncSteady, made by its lifespan."""
    steady: AsyncSteady = request.app.state.steady
    return steady


Steady = Annotated[AsyncSteady, Depends(steady_of)]


def create_app(dsn: str | None = None, *, pooler: str = "transaction", pool_size: int = 4,
               max_waiting: int = 16, deadline: float = 0.25,
               breaker: CircuitBreaker | None = None) -> FastAPI:
    """The service; ``dsn`` defaults to ``PGSTEADY_DSN`` (PgBouncer in transaction mode)."""
    url = url_from_dsn(dsn or os.environ["PGSTEADY_DSN"])
    breaker = breaker or CircuitBreaker("shop-db", failure_rate=0.5, min_calls=10, open_for=5)
    cache = AsyncStaleCache(fresh_for=2, stale_for=300)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = create_async_engine(url, pool_size=pool_size, max_overflow=0)
        app.state.steady = AsyncSteady(engine, pooler=pooler, service="shop",
                                       max_waiting=max_waiting, breaker=breaker)
        await app.state.steady.run(create_schema, deadline=30)
        try:
            yield
        finally:
            await app.state.steady.aclose()
            await engine.dispose()

    app = FastAPI(lifespan=lifespan)

    @app.get("/products/{product_id}")
    async def product(product_id: int, steady: Steady) -> dict[str, Any]:
        async def load() -> dict[str, Any] | None:
            found = await steady.scalar(select(Product).where(Product.id == product_id),
                                        deadline=deadline)
            return None if found is None else {"id": found.id, "name": found.name,
                                               "price_cents": found.price_cents}

        served = await cache.lookup(f"product:{product_id}", load, deadline=deadline)
        if served.value is None:
            raise HTTPException(404, f"no product {product_id}")
        return {**served.value, "stale": served.stale}

    @app.put("/products/{product_id}/price")
    async def set_price(product_id: int, price_cents: int, steady: Steady) -> dict[str, int]:
        async def change(session: AsyncSession) -> int:
            result = await session.execute(update(Product).where(Product.id == product_id)
                                           .values(price_cents=price_cents))
            return int(result.rowcount)  # type: ignore[attr-defined]

        if not await steady.run(change, deadline=deadline):
            raise HTTPException(404, f"no product {product_id}")
        await cache.invalidate(f"product:{product_id}")
        return {"id": product_id, "price_cents": price_cents}

    @app.exception_handler(DeadlineExceeded)
    async def too_slow(_request: Request, exc: DeadlineExceeded) -> JSONResponse:
        # A started write still commits: the client learns "unknown", not "failed".
        return JSONResponse({"detail": str(exc), "phase": exc.phase}, status_code=504)

    @app.exception_handler(Overloaded)
    async def overloaded(_request: Request, exc: Overloaded) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503,
                            headers={"Retry-After": "1"})

    @app.exception_handler(CircuitOpen)
    async def circuit_open(_request: Request, exc: CircuitOpen) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503,
                            headers={"Retry-After": str(max(1, math.ceil(exc.retry_after)))})

    async def db_ready(timeout: float) -> None:
        await app.state.steady.scalar(select(1), deadline=timeout)

    async def db_deep(timeout: float) -> CheckResult:
        version = await app.state.steady.scalar(
            text("select current_setting('server_version')"), deadline=timeout)
        return CheckResult(output=f"PostgreSQL {version}")

    health = Health({"db": Check(db_ready, db_deep, "datastore"),
                     "breaker": breaker_check(breaker)}, service="shop")

    # app.mount("/ops", health.asgi()) is the one-liner once Health.asgi() honours the mount's
    # root_path (Starlette passes the full path; today it answers 404 under a prefix).
    @app.get("/ops/health/{probe}")
    async def probe(probe: Literal["live", "ready", "deep"]) -> JSONResponse:
        report = health.live() if probe == "live" else \
            await (health.aready() if probe == "ready" else health.adeep())
        return JSONResponse(report, status_code=status_code(report), media_type=CONTENT_TYPE,
                            headers={"Cache-Control": "no-store"})

    return app

