"""A newcomer's first try: the lab's pooled DSN (PgBouncer) given to Database or
AsyncDatabase without ``pooler=`` fails at once with the fix, not at the deadline."""

from __future__ import annotations

import asyncio
import time

import pytest

from pgsteady import AsyncDatabase, Database
from pgsteady.errors import UsageError

FIX = 'pass pooler="transaction"'


@pytest.fixture
def pooled(pgsteady_stack, pgsteady_database) -> str:
    return pgsteady_stack(pool_size=2, pool_mode="transaction",
                          proxy=False).pooled_dsn(pgsteady_database.name)


def test_database_through_pgbouncer_without_pooler_fails_at_once_with_the_fix(pooled):
    """The first call and ``wait()`` raise UsageError naming pooler="transaction" well
    before their 8 s (the caller got DeadlineExceeded 'waiting for a connection' at the
    deadline, psycopg_pool retrying PgBouncer's refusal in silence)."""
    with Database(pooled, pool_size=2) as db:
        started = time.monotonic()
        with pytest.raises(UsageError, match=FIX):
            db.fetchone("select 1", deadline=8)
        with pytest.raises(UsageError, match=FIX):
            db.wait(8)
        assert time.monotonic() - started < 4
    with Database(pooled, pool_size=2, pooler="transaction") as db:  # the fix works
        assert db.fetchone("select 1", deadline=8) == (1,)


def test_async_database_through_pgbouncer_without_pooler_fails_at_once_with_the_fix(pooled):
    """The same for AsyncDatabase (a FastAPI lifespan's ``wait()`` hung 8 s)."""
    async def main() -> None:
        async with AsyncDatabase(pooled, pool_size=2) as db:
            started = time.monotonic()
            with pytest.raises(UsageError, match=FIX):
                await db.wait(8)
            with pytest.raises(UsageError, match=FIX):
                await db.fetchone("select 1", deadline=8)
            assert time.monotonic() - started < 4
        async with AsyncDatabase(pooled, pool_size=2, pooler="transaction") as db:
            assert await db.fetchone("select 1", deadline=8) == (1,)

    asyncio.run(main())


def test_a_direct_server_that_is_down_is_not_called_a_pooler(pgsteady_database):
    """A plain connection failure is no refusal: the caller still waits for its deadline and
    gets the usual error, never the pooler advice."""
    with Database("host=127.0.0.1 port=1 dbname=x connect_timeout=1", pool_size=1) as db:
        with pytest.raises(Exception) as raised:
            db.fetchone("select 1", deadline=1)
        assert FIX not in str(raised.value)
