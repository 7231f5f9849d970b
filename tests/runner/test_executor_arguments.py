"""Wrong arguments to the executors fail when the object is made (or when run() is called),
in one line naming the argument: never a raw TypeError, an un-awaited coroutine, or a failure
at the first call."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine

from pgsteady import AsyncDatabase, Database
from pgsteady.errors import UsageError
from pgsteady.guards import CircuitBreaker
from pgsteady.sqlalchemy import AsyncSteady, Steady, url_from_dsn


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"pool_size": None}, "pool_size"), ({"pool_size": "4"}, "pool_size"),
    ({"breaker": "x"}, "breaker"), ({"breaker": object()}, "breaker")])
def test_database_constructors_name_the_wrong_argument(pgsteady_database, kwargs, named):
    """Database and AsyncDatabase refuse a pool_size that is no number and a breaker that is
    no CircuitBreaker at once (TypeError deep inside, or accepted and failing at the first
    call, before)."""
    with pytest.raises(UsageError, match=named):
        Database(pgsteady_database.dsn, open=False, **kwargs)
    with pytest.raises(UsageError, match=named):
        AsyncDatabase(pgsteady_database.dsn, **kwargs)  # opened by open() or async with


def test_run_refuses_what_is_no_job_function(pgsteady_database):
    """run("select 1") and an async function given to the sync executor are one-line usage
    errors naming run, not TypeError or a coroutine returned un-awaited."""
    async def coroutine_fn(conn):
        return 1

    with Database(pgsteady_database.dsn, pool_size=1) as db:
        with pytest.raises(UsageError, match=r"Database\.run needs a function.*execute/fetchone"):
            db.run("select 1")
        with pytest.raises(UsageError, match=r"Database\.run got an async function"):
            db.run(coroutine_fn)
        assert db.run(lambda conn: conn.execute("select 1").fetchone()) == (1,)

    def plain(conn):
        return 1

    async def main() -> None:
        async with AsyncDatabase(pgsteady_database.dsn, pool_size=1) as db:
            with pytest.raises(UsageError, match=r"AsyncDatabase\.run needs a function"):
                await db.run("select 1")
            with pytest.raises(UsageError, match=r"needs an async function"):
                await db.run(plain)
            assert await db.run(coroutine_fn) == 1
            assert await db.run(lambda conn: coroutine_fn(conn)) == 1  # noqa: PLW0108 -- a lambda may return a coroutine

    asyncio.run(main())


def test_steady_objects_check_their_arguments(pgsteady_database):
    """Steady: a breaker that is no CircuitBreaker, a concurrency above what the engine's
    pool lends, run("...") and run(async_fn) fail at once naming the argument; AsyncSteady's
    run(plain def) too."""
    url = url_from_dsn(pgsteady_database.dsn)

    def engine():
        return create_engine(url, pool_size=2, max_overflow=1)

    with pytest.raises(UsageError, match=r"breaker"):
        Steady(engine(), breaker="x")
    with pytest.raises(UsageError, match=r"concurrency=99 .* \(3: pool_size \+ max_overflow\)"):
        Steady(engine(), concurrency=99)
    steady = Steady(engine(), concurrency=3, breaker=CircuitBreaker("db"))

    async def coroutine_fn(session):
        return 1

    try:
        with pytest.raises(UsageError, match=r"Steady\.run needs a function of the session"):
            steady.run("select 1")
        with pytest.raises(UsageError, match=r"Steady\.run got an async function"):
            steady.run(coroutine_fn)
        assert steady.run(lambda session: session.execute(text("select 1")).scalar()) == 1
    finally:
        steady.close()
        steady.engine.dispose()

    def plain(session):
        return 1

    async def main() -> None:
        async_engine = create_async_engine(url, pool_size=2, max_overflow=0)
        steady = AsyncSteady(async_engine)
        try:
            with pytest.raises(UsageError, match=r"AsyncSteady\.run needs an async function"):
                await steady.run(plain)
            assert await steady.run(coroutine_fn) == 1
        finally:
            await steady.aclose()
            await async_engine.dispose()

    asyncio.run(main())
