"""bounded(): the seed's bounded log query — read-only, short timeouts, a row cap, a slot."""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg
import pytest
from psycopg import sql

from pgsteady import AsyncDatabase, Database
from pgsteady.errors import LimitExceeded, UsageError
from pgsteady.guards import AsyncKeyedLimiter, KeyedLimiter, abounded, bounded


@pytest.fixture
def logs_db(pgsteady_database):
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table logs (id bigint primary key, org int, line text)")
        conn.execute("insert into logs select g, g % 10, 'line ' || g "
                     "from generate_series(1, 5000) g")
    with Database(pgsteady_database.dsn, pool_size=2) as db:
        yield db


def test_a_write_fails_read_only(logs_db):
    """An UPDATE (or a write hidden in a WITH) fails inside PostgreSQL: the transaction is
    read-only."""
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        bounded(logs_db, "update logs set line = 'x' where id = %s", (1,))
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        bounded(logs_db, "with w as (delete from logs returning *) select * from w")
    assert logs_db.fetchone("select count(*) from logs where line = 'x'") == (0,)


def test_a_slow_query_stops_at_its_statement_timeout(logs_db):
    """pg_sleep(10) is cancelled by the server at statement_timeout (here 0.3 s)."""
    start = time.monotonic()
    with pytest.raises(psycopg.errors.QueryCanceled):
        bounded(logs_db, "select pg_sleep(10)", statement_timeout=0.3)
    assert 0.25 <= time.monotonic() - start < 2.0


def test_rows_stop_at_max_rows(logs_db):
    """5,000 matching rows, max_rows 100: 100 rows come back, marked truncated; a small
    result is not."""
    rows = bounded(logs_db, "select id from logs where org = %s order by id", (3,), max_rows=100)
    assert len(rows) == 100 and rows.truncated and rows[0] == (3,)
    few = bounded(logs_db, sql.SQL("select id from {} where id <= %s").format(
        sql.Identifier("logs")), (5,))
    assert len(few) == 5 and not few.truncated


def test_a_key_gets_at_most_its_slots(logs_db):
    """With a limiter of 1 per key, a second query for the same org is refused while the
    first runs; another org is not affected."""
    limiter = KeyedLimiter(1)
    started = threading.Event()

    def slow() -> None:
        started.set()
        bounded(logs_db, "select pg_sleep(0.5)", key="org:1", limiter=limiter)

    thread = threading.Thread(target=slow)
    thread.start()
    started.wait(5)
    time.sleep(0.1)
    with pytest.raises(LimitExceeded):
        bounded(logs_db, "select 1", key="org:1", limiter=limiter, wait=0.05)
    assert bounded(logs_db, "select 1", key="org:2", limiter=limiter) == [(1,)]
    thread.join(5)
    with pytest.raises(UsageError):
        bounded(logs_db, "select 1", limiter=limiter)


def test_behind_a_transaction_pooler_nothing_leaks(pgsteady_stack, pgsteady_database):
    """Through PgBouncer in transaction mode: bounded works and its read-only mode and
    timeouts do not leak to the next statement on that server connection."""
    cluster = pgsteady_stack(pool_size=1)
    with Database(cluster.pooled_dsn(pgsteady_database.name), pool_size=1,
                  pooler="transaction") as db:
        assert bounded(db, "select generate_series(1, 10)", max_rows=3) == [(1,), (2,), (3,)]
        assert db.fetchone("select current_setting('transaction_read_only'), "
                           "current_setting('lock_timeout')") == ("off", "5s")


def test_abounded_with_an_async_limiter(pgsteady_database):
    """The asyncio form: row cap, read-only, and the limiter's slot."""
    async def main() -> None:
        limiter = AsyncKeyedLimiter(1)
        async with AsyncDatabase(pgsteady_database.dsn, pool_size=2) as db:
            rows = await abounded(db, "select generate_series(1, 50)", max_rows=5,
                                  key="org:1", limiter=limiter)
            assert len(rows) == 5 and rows.truncated
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                await abounded(db, "create table t (a int)")

    asyncio.run(main())
