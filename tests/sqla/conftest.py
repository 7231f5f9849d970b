"""Run each Steady test against both ``Steady`` (sync engine) and ``AsyncSteady`` (asyncio)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine

from pgsteady.sqlalchemy import AsyncSteady, Steady, url_from_dsn


class SyncFacade:
    """A Steady over a sync engine; ``run_sql`` runs statements in one job and returns the
    last one's first column (or None)."""

    def __init__(self, dsn: str, engine_kwargs: dict[str, Any], kwargs: dict[str, Any]) -> None:
        self.engine = create_engine(url_from_dsn(dsn), **engine_kwargs)
        self.steady = Steady(self.engine, **kwargs)

    def run_sql(self, *statements: str, deadline: float | None = 5.0) -> Any:
        def work(session: Any) -> Any:
            value = None
            for statement in statements:
                result = session.execute(text(statement))
                value = result.scalar() if result.returns_rows else None
            return value
        return self.steady.run(work, deadline=deadline)

    def scalar(self, statement: str, deadline: float | None = 5.0) -> Any:
        return self.steady.scalar(text(statement), deadline=deadline)

    def stats(self) -> Any:
        return self.steady.stats()

    def pool_idle(self) -> int:
        return int(self.engine.pool.checkedin())  # type: ignore[attr-defined]

    def close(self) -> None:
        self.steady.close()
        self.engine.dispose()


class AsyncFacade:
    """An AsyncSteady on its own loop in a background thread, driven like SyncFacade."""

    def __init__(self, dsn: str, engine_kwargs: dict[str, Any], kwargs: dict[str, Any]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.engine = create_async_engine(url_from_dsn(dsn), **engine_kwargs)
        self.steady = self._do(self._make(kwargs))

    async def _make(self, kwargs: dict[str, Any]) -> AsyncSteady:
        return AsyncSteady(self.engine, **kwargs)

    def _do(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(60)

    def run_sql(self, *statements: str, deadline: float | None = 5.0) -> Any:
        async def work(session: Any) -> Any:
            value = None
            for statement in statements:
                result = await session.execute(text(statement))
                value = result.scalar() if result.returns_rows else None
            return value
        return self._do(self.steady.run(work, deadline=deadline))

    def scalar(self, statement: str, deadline: float | None = 5.0) -> Any:
        return self._do(self.steady.scalar(text(statement), deadline=deadline))

    def stats(self) -> Any:
        async def snapshot() -> Any:
            return self.steady.stats()
        return self._do(snapshot())

    def pool_idle(self) -> int:
        return int(self.engine.sync_engine.pool.checkedin())  # type: ignore[attr-defined]

    def close(self) -> None:
        self._do(self.steady.aclose())
        self._do(self.engine.dispose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@pytest.fixture(params=["sync", "async"])
def make_steady(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``make_steady(dsn, engine={...}, **steady_kwargs)``: a Steady or an AsyncSteady behind
    the same sync facade; closed (and its engine disposed) after the test."""
    made: list[Any] = []

    def make(dsn: str, *, engine: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        engine_kwargs = {"pool_size": 1, "max_overflow": 0, **(engine or {})}
        kind = SyncFacade if request.param == "sync" else AsyncFacade
        facade = kind(dsn, engine_kwargs, kwargs)
        made.append(facade)
        return facade

    yield make
    for facade in made:
        facade.close()
