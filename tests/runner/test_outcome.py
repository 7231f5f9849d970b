"""A connection lost under a job: OutcomeUnknown when a statement or COMMIT had been sent
(it may have been applied), a plain QueryFailed when nothing could have committed.

Faults come from the real TCP proxy between the Database and PostgreSQL; each cut waits
until pg_stat_activity shows the job's backend at the step under test, not for a timer.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import psycopg
import pytest

import pgsteady
from pgsteady.errors import DeadlineExceeded, OutcomeUnknown, QueryFailed
from pgsteady.lab.proxy import FaultProxy

SLOW_INSERT = "insert into t (id) select 1 from pg_sleep(1)"

# A deferred constraint trigger runs inside COMMIT: the backend sleeps there, then commits.
SLOW_COMMIT_SCHEMA = """
create table t (id int primary key);
create function slow_commit() returns trigger language plpgsql as
    $$ begin perform pg_sleep(1); return null; end $$;
create constraint trigger slow_commit after insert on t deferrable initially deferred
    for each row execute function slow_commit();
"""


@pytest.fixture
def setup(pgsteady_database: Any, pgsteady_postgres: Any,
          pgsteady_proxy: FaultProxy) -> tuple[str, str, FaultProxy]:
    """(direct DSN, DSN through the fault proxy, the proxy) for a database with table t."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table t (id int primary key)")
    proxied = pgsteady_postgres.dsn(pgsteady_database.name, port=pgsteady_proxy.port)
    return pgsteady_database.dsn, proxied, pgsteady_proxy


def _cut_when(proxy: FaultProxy, dsn: str, query_like: str, *, wait_event: str) -> None:
    """Reset every proxied connection once a backend runs ``query_like`` and waits on
    ``wait_event`` (the statement has reached the server and is at the step under test)."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        for _ in range(1000):
            if admin.execute(
                    "select 1 from pg_stat_activity where datname = current_database() "
                    "and state = 'active' and query ilike %s and wait_event = %s",
                    (query_like, wait_event)).fetchone():
                proxy.reset()
                return
            time.sleep(0.01)
    pytest.fail(f"no backend ran {query_like!r} within 10 s")


def _cut_in_background(proxy: FaultProxy, dsn: str, query_like: str,
                       wait_event: str = "PgSleep") -> threading.Thread:
    cutter = threading.Thread(target=_cut_when, args=(proxy, dsn, query_like),
                              kwargs={"wait_event": wait_event}, daemon=True)
    cutter.start()
    return cutter


def _rows_once_settled(dsn: str) -> int:
    """Rows in t once no other backend of this database is busy (the cut-off backend ends
    its statement, commits or rolls back, and only then finds its client gone)."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        for _ in range(1000):
            if not admin.execute(
                    "select 1 from pg_stat_activity where datname = current_database() "
                    "and pid <> pg_backend_pid() and state <> 'idle'").fetchone():
                break
            time.sleep(0.01)
        row = admin.execute("select count(*) from t").fetchone()
    assert row is not None
    return int(row[0])


def _transaction(db: Any, *statements: str) -> Any:
    """Run ``statements`` in one ``db.run`` transaction (a Database or the async facade)."""
    if hasattr(db, "adb"):
        async def abody(conn: psycopg.AsyncConnection[Any]) -> None:
            for statement in statements:
                await conn.execute(statement)
        return db.run(abody, deadline=10)

    def body(conn: psycopg.Connection[Any]) -> None:
        for statement in statements:
            conn.execute(statement)
    return db.run(body, deadline=10)


def test_an_autocommit_write_cut_off_from_its_reply_is_outcome_unknown(make_db, setup):
    """A write whose connection is cut after it was sent raises OutcomeUnknown (a
    QueryFailed, SQLSTATE 08007) and the row is there: retrying it would write twice."""
    direct, proxied, proxy = setup
    db = make_db(proxied, pool_size=1)
    db.wait(10)
    cutter = _cut_in_background(proxy, direct, "insert into t%")
    with pytest.raises(QueryFailed) as info:
        db.execute(SLOW_INSERT, deadline=10)
    cutter.join()
    assert isinstance(info.value, pgsteady.OutcomeUnknown)
    assert isinstance(info.value, psycopg.errors.TransactionResolutionUnknown)
    assert info.value.sqlstate == "08007"
    assert "may have been applied" in str(info.value)
    assert isinstance(info.value.__cause__, psycopg.OperationalError)
    assert _rows_once_settled(direct) == 1
    assert db.stats().outcome_unknown == 1


def test_a_commit_cut_off_from_its_reply_is_outcome_unknown(make_db, pgsteady_database,
                                                           pgsteady_postgres, pgsteady_proxy):
    """A transaction whose connection is cut while COMMIT runs raises OutcomeUnknown, and it
    did commit."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute(SLOW_COMMIT_SCHEMA)
    proxied = pgsteady_postgres.dsn(pgsteady_database.name, port=pgsteady_proxy.port)
    db = make_db(proxied, pool_size=1)
    db.wait(10)
    cutter = _cut_in_background(pgsteady_proxy, pgsteady_database.dsn, "commit%")
    with pytest.raises(OutcomeUnknown):
        _transaction(db, "insert into t (id) values (1)")
    cutter.join()
    assert _rows_once_settled(pgsteady_database.dsn) == 1


def test_a_transaction_cut_before_commit_is_a_plain_failure(make_db, setup):
    """A transaction whose connection is cut before COMMIT was sent raises a QueryFailed that
    is not OutcomeUnknown and says a retry is safe; nothing was written, and a retry works."""
    direct, proxied, proxy = setup
    db = make_db(proxied, pool_size=1)
    db.wait(10)
    cutter = _cut_in_background(proxy, direct, "select pg_sleep%")
    with pytest.raises(QueryFailed) as info:
        _transaction(db, "insert into t (id) values (1)", "select pg_sleep(1)")
    cutter.join()
    assert not isinstance(info.value, OutcomeUnknown)
    assert "safe to retry" in str(info.value)
    assert _rows_once_settled(direct) == 0
    assert db.stats().outcome_unknown == 0
    _transaction(db, "insert into t (id) values (1)")
    assert _rows_once_settled(direct) == 1


def test_a_commit_never_sent_on_a_dead_connection_is_a_plain_failure(make_db, setup):
    """If ``fn`` swallows its connection's failure and returns, no COMMIT can be sent: the
    job fails as QueryFailed, not OutcomeUnknown, and nothing was written."""
    direct, proxied, proxy = setup
    db = make_db(proxied, pool_size=1)
    db.wait(10)

    def body(conn: psycopg.Connection[Any]) -> None:
        conn.execute("insert into t (id) values (1)")
        proxy.reset()
        for _ in range(500):  # the reset happens on the proxy's loop, a moment later
            try:
                conn.execute("select 1")
            except psycopg.OperationalError:
                return
            time.sleep(0.01)

    async def abody(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute("insert into t (id) values (1)")
        proxy.reset()
        for _ in range(500):
            try:
                await conn.execute("select 1")
            except psycopg.OperationalError:
                return
            await asyncio.sleep(0.01)

    with pytest.raises(QueryFailed) as info:
        db.run(abody if hasattr(db, "adb") else body, deadline=10)
    assert not isinstance(info.value, OutcomeUnknown)
    assert _rows_once_settled(direct) == 0


def test_a_write_abandoned_at_its_deadline_then_cut_off_is_counted_and_logged(
        make_db, setup, caplog):
    """DeadlineExceeded while running does not promise completion; if the connection is then
    cut, stats().outcome_unknown counts the job and a warning is logged, and the row is
    there."""
    direct, proxied, proxy = setup
    db = make_db(proxied, pool_size=1)
    db.wait(10)
    with pytest.raises(DeadlineExceeded) as info:
        db.execute(SLOW_INSERT, deadline=0.2)
    assert info.value.phase == "running"
    assert "run to completion" not in str(info.value)
    assert "may still commit" in str(info.value)
    with caplog.at_level(logging.WARNING, logger="pgsteady.runner"):
        _cut_when(proxy, direct, "insert into t%", wait_event="PgSleep")
        for _ in range(1000):
            if db.stats().in_flight == 0:
                break
            time.sleep(0.01)
    stats = db.stats()
    assert (stats.outcome_unknown, stats.failed, stats.abandoned_completions) == (1, 1, 0)
    assert any("may have been applied" in r.getMessage() for r in caplog.records)
    assert _rows_once_settled(direct) == 1


def test_behind_pgbouncer_a_write_cut_off_from_its_reply_is_outcome_unknown(
        make_db, pgsteady_database, pgsteady_stack):
    """Behind PgBouncer in transaction mode, a write whose server connection is cut after
    it was sent raises OutcomeUnknown, and the row is there."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table t (id int primary key)")
    cluster = pgsteady_stack(pool_size=1, proxy=True)
    assert isinstance(cluster.proxy, FaultProxy)
    db = make_db(cluster.pooled_dsn(pgsteady_database.name), pool_size=1,
                 pooler="transaction")
    db.wait(10)
    cutter = _cut_in_background(cluster.proxy, pgsteady_database.dsn, "%insert into t%")
    with pytest.raises(OutcomeUnknown) as info:
        db.execute(SLOW_INSERT, deadline=10)
    cutter.join()
    assert isinstance(info.value.__cause__, psycopg.OperationalError)
    assert _rows_once_settled(pgsteady_database.dsn) == 1
