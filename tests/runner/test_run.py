"""db.run(fn): several statements in one transaction on a worker, under the same rules."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from pgsteady import AsyncDatabase, Database, DeadlineExceeded


def _setup(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table accounts (id int primary key, balance int not null)")
        conn.execute("insert into accounts values (1, 100), (2, 0)")


def _balances(dsn: str) -> list[tuple[int, int]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("select id, balance from accounts order by id").fetchall()


def _transfer(conn: psycopg.Connection) -> str:
    conn.execute("update accounts set balance = balance - 30 where id = 1")
    conn.execute("update accounts set balance = balance + 30 where id = 2")
    return str(conn.execute("select current_setting('statement_timeout')").fetchone()[0])


def test_run_commits_all_or_nothing(pgsteady_database):
    """Statements in fn commit together; an exception in fn rolls all of them back."""
    _setup(pgsteady_database.dsn)
    with Database(pgsteady_database.dsn, pool_size=1) as db:
        assert db.run(_transfer, deadline=5) == "30s"
        assert _balances(pgsteady_database.dsn) == [(1, 70), (2, 30)]

        def half_then_fail(conn: psycopg.Connection) -> None:
            conn.execute("update accounts set balance = 0 where id = 1")
            conn.execute("select 1/0")

        with pytest.raises(psycopg.errors.DivisionByZero):
            db.run(half_then_fail, deadline=5)
        assert _balances(pgsteady_database.dsn) == [(1, 70), (2, 30)]


def test_run_past_its_deadline_still_commits(pgsteady_database):
    """The caller stops waiting; the transaction runs to its end and commits."""
    _setup(pgsteady_database.dsn)
    with Database(pgsteady_database.dsn, pool_size=1) as db:
        def slow_transfer(conn: psycopg.Connection) -> None:
            conn.execute("select pg_sleep(0.3)")
            _transfer(conn)

        with pytest.raises(DeadlineExceeded) as info:
            db.run(slow_transfer, deadline=0.05)
        assert info.value.phase == "running"
        deadline = time.monotonic() + 5
        while db.stats().in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        assert db.stats().abandoned_completions == 1
    assert _balances(pgsteady_database.dsn) == [(1, 70), (2, 30)]


def test_run_behind_a_transaction_pooler_sets_local_timeouts(pgsteady_stack, pgsteady_database):
    """In transaction mode the settings are SET LOCAL inside fn's transaction."""
    _setup(pgsteady_database.dsn)
    cluster = pgsteady_stack(pool_size=1)
    with Database(cluster.pooled_dsn(pgsteady_database.name), pool_size=1,
                  pooler="transaction", statement_timeout=7) as db:
        assert db.run(_transfer, deadline=5) == "7s"
        assert db.fetchone("show statement_timeout", deadline=5) == ("7s",)
    with psycopg.connect(cluster.pooled_dsn(pgsteady_database.name),
                         prepare_threshold=None) as other:
        assert other.execute("show statement_timeout").fetchone() == ("0",)


def test_async_run_commits_all_or_nothing(pgsteady_database):
    """The async twin: await fn(conn) in one transaction, rolled back on an exception."""
    _setup(pgsteady_database.dsn)

    async def transfer(conn: psycopg.AsyncConnection) -> int:
        await conn.execute("update accounts set balance = balance - 30 where id = 1")
        cur = await conn.execute("update accounts set balance = balance + 30 where id = 2")
        return cur.rowcount

    async def fail(conn: psycopg.AsyncConnection) -> None:
        await conn.execute("update accounts set balance = 0")
        await conn.execute("select 1/0")

    async def scenario() -> None:
        async with AsyncDatabase(pgsteady_database.dsn, pool_size=1) as db:
            assert await db.run(transfer, deadline=5) == 1
            with pytest.raises(psycopg.errors.DivisionByZero):
                await db.run(fail, deadline=5)

    asyncio.run(scenario())
    assert _balances(pgsteady_database.dsn) == [(1, 70), (2, 30)]
