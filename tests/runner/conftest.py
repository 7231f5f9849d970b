"""Run every Database test against both the thread and the asyncio implementation."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pgsteady.arunner import AsyncDatabase
from pgsteady.runner import Database


class AsyncAsSync:
    """Drive an AsyncDatabase from plain threads: its own loop runs in a background thread,
    so tests can call it concurrently exactly as they call the sync Database."""

    def __init__(self, conninfo: str, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.adb = self._do(self._make(conninfo, kwargs))

    async def _make(self, conninfo: str, kwargs: dict[str, Any]) -> AsyncDatabase:
        adb = AsyncDatabase(conninfo, **kwargs)
        await adb.open()
        return adb

    def _do(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(60)

    def fetchone(self, *args: Any, **kwargs: Any) -> Any:
        return self._do(self.adb.fetchone(*args, **kwargs))

    def fetchall(self, *args: Any, **kwargs: Any) -> Any:
        return self._do(self.adb.fetchall(*args, **kwargs))

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return self._do(self.adb.execute(*args, **kwargs))

    def run(self, fn: Callable[[Any], Any], **kwargs: Any) -> Any:
        """``AsyncDatabase.run``; ``fn`` is a coroutine function, as that takes."""
        return self._do(self.adb.run(fn, **kwargs))

    def wait(self, timeout: float = 30.0) -> None:
        self._do(self.adb.wait(timeout))

    def stats(self) -> Any:
        return self._do(_value(self.adb.stats))

    def close(self) -> None:
        self._do(self.adb.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


async def _value(fn: Callable[[], Any]) -> Any:
    return fn()


@pytest.fixture(params=["sync", "async"])
def make_db(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``make_db(conninfo, **kwargs)``: a Database (sync) or an AsyncDatabase behind a sync
    facade (async); closed after the test."""
    made: list[Any] = []

    def make(conninfo: str, **kwargs: Any) -> Any:
        db = Database(conninfo, **kwargs) if request.param == "sync" \
            else AsyncAsSync(conninfo, **kwargs)
        made.append(db)
        return db

    yield make
    for db in made:
        db.close()
