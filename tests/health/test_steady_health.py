"""Steady/AsyncSteady in health checks (``db_check``) and warmed up before traffic."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine

from pgsteady.errors import CannotConnect
from pgsteady.health import Health, db_check
from pgsteady.sqlalchemy import AsyncSteady, Steady, url_from_dsn


def test_db_check_takes_a_steady(pgsteady_database):
    """db_check(Steady): ready passes, deep names the server as a primary (it was a
    UsageError); a Steady at a closed port fails ready within the probe's deadline."""
    engine = create_engine(url_from_dsn(pgsteady_database.dsn), pool_size=2, max_overflow=0)
    with Steady(engine) as steady:
        health = Health({"db": db_check(steady)}, timeout=2.0, deep_timeout=3.0)
        try:
            assert health.ready()["status"] == "pass"
            deep = health.deep()
            assert deep["status"] == "pass", deep
            assert deep["checks"]["db"][0]["output"].endswith(", primary")
        finally:
            health.close()
    engine.dispose()
    down = create_engine(url_from_dsn("host=127.0.0.1 port=1 dbname=x user=u"), pool_size=1,
                         max_overflow=0)
    with Steady(down, connect_timeout=2) as steady:
        health = Health({"db": db_check(steady)}, timeout=1.0)
        try:
            start = time.monotonic()
            assert health.ready()["status"] == "fail"
            assert time.monotonic() - start < 5
        finally:
            health.close()
    down.dispose()


def test_db_check_takes_an_async_steady(pgsteady_database):
    """db_check(AsyncSteady): the async probes pass, deep names a primary."""
    async def main() -> tuple[str, dict]:
        engine = create_async_engine(url_from_dsn(pgsteady_database.dsn), pool_size=2,
                                     max_overflow=0)
        steady = AsyncSteady(engine)
        health = Health({"db": db_check(steady)}, timeout=2.0, deep_timeout=3.0)
        try:
            return (await health.aready())["status"], await health.adeep()
        finally:
            health.close()
            await steady.aclose()
            await engine.dispose()

    ready, deep = asyncio.run(main())
    assert ready == "pass"
    assert deep["status"] == "pass", deep
    assert deep["checks"]["db"][0]["output"].endswith(", primary")


def test_warm_up_opens_the_pool_with_settings(pgsteady_database):
    """Steady.warm_up() opens concurrency connections before any call (the pool had none),
    each carrying the session settings, and they stay in the pool for the first calls."""
    engine = create_engine(url_from_dsn(pgsteady_database.dsn), pool_size=3, max_overflow=0)
    with Steady(engine, lock_timeout=1.5, service="warm") as steady:
        assert engine.pool.checkedin() == 0
        assert steady.warm_up(timeout=10) == 3
        assert engine.pool.checkedin() == 3
        assert steady.scalar(text("SHOW lock_timeout")) == "1500ms"
        assert engine.pool.checkedin() == 3  # the first call used a warmed connection
    engine.dispose()


def test_async_warm_up_opens_the_pool(pgsteady_database):
    """AsyncSteady.warm_up() opens concurrency connections before any call."""
    async def main() -> tuple[int, int, int]:
        engine = create_async_engine(url_from_dsn(pgsteady_database.dsn), pool_size=3,
                                     max_overflow=0)
        steady = AsyncSteady(engine)
        try:
            before = engine.sync_engine.pool.checkedin()
            opened = await steady.warm_up(timeout=10)
            return before, opened, engine.sync_engine.pool.checkedin()
        finally:
            await steady.aclose()
            await engine.dispose()

    assert asyncio.run(main()) == (0, 3, 3)


def test_warm_up_that_cannot_connect_is_one_line():
    """warm_up against a closed port: CannotConnect, one line, no password, at once."""
    engine = create_engine(url_from_dsn("host=127.0.0.1 port=1 dbname=x user=u password=s3cret"),
                           pool_size=2, max_overflow=0)
    with Steady(engine, connect_timeout=2) as steady:
        start = time.monotonic()
        with pytest.raises(CannotConnect) as caught:
            steady.warm_up(timeout=5)
        assert time.monotonic() - start < 10
    message = str(caught.value)
    assert message.startswith("Steady.warm_up: could not open connection 1 of 2 to ")
    assert "\n" not in message and "s3cret" not in message
    engine.dispose()
