"""Steady / AsyncSteady behind PgBouncer: a statement PgBouncer refuses while PostgreSQL is
down fails as a QueryFailed that says a retry is safe; one cut off after a server received
it stays OutcomeUnknown."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from pgsteady.errors import OutcomeUnknown, QueryFailed
from pgsteady.lab.cluster import Cluster
from pgsteady.lab.proxy import FaultProxy

REFUSALS = ("server login has been failing", "query_wait_timeout")


def _table(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table t (id int primary key)")


def _rows(dsn: str) -> int:
    """Rows in t once no other backend of the database is busy."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(1000):
            if not conn.execute("select 1 from pg_stat_activity where datname = "
                                "current_database() and pid <> pg_backend_pid() "
                                "and state <> 'idle'").fetchone():
                break
            time.sleep(0.01)
        row = conn.execute("select count(*) from t").fetchone()
    assert row is not None
    return int(row[0])


def _proxy(cluster: Cluster) -> FaultProxy:
    assert isinstance(cluster.proxy, FaultProxy)
    return cluster.proxy


def test_pgbouncer_refusing_while_postgres_is_down_is_not_outcome_unknown(
        make_steady, pgsteady_stack, pgsteady_database):
    """Every autocommit write PgBouncer refuses while PostgreSQL is down is a QueryFailed
    saying nothing was applied (none was); stats count no unknown outcome."""
    _table(pgsteady_database.dsn)
    cluster = pgsteady_stack(pool_size=2, proxy=True, query_wait_timeout=1)
    steady = make_steady(cluster.pooled_dsn(pgsteady_database.name), pooler="transaction")
    assert steady.scalar("insert into t values (0) returning id", deadline=10) == 0
    _proxy(cluster).stop()
    for _ in range(200):
        if cluster.server_connections(pgsteady_database.name) == 0:
            break
        time.sleep(0.05)
    errors = []
    for i in range(1, 7):
        with pytest.raises(QueryFailed) as info:
            steady.scalar(f"insert into t values ({i}) returning id", deadline=10)
        errors.append(info.value)
    for error in errors:
        assert not isinstance(error, OutcomeUnknown), str(error)
        assert "safe to retry" in str(error) and "before any server saw it" in str(error)
        assert any(refusal in str(error) for refusal in REFUSALS), str(error)
    assert any("server login has been failing" in str(error) for error in errors)
    assert steady.stats().outcome_unknown == 0
    assert _rows(pgsteady_database.dsn) == 1


def test_a_write_cut_off_after_pgbouncer_passed_it_on_is_outcome_unknown(
        make_steady, pgsteady_stack, pgsteady_database):
    """The same PgBouncer error code for a server connection cut under a running write
    ("server conn crashed?") stays OutcomeUnknown, and the write did commit."""
    _table(pgsteady_database.dsn)
    cluster = pgsteady_stack(pool_size=1, proxy=True)
    steady = make_steady(cluster.pooled_dsn(pgsteady_database.name), pooler="transaction")
    proxy = _proxy(cluster)

    def cut_when_running() -> None:
        with psycopg.connect(pgsteady_database.dsn, autocommit=True) as admin:
            for _ in range(1000):
                if admin.execute("select 1 from pg_stat_activity where state = 'active' "
                                 "and query ilike '%insert into t%' "
                                 "and wait_event = 'PgSleep'").fetchone():
                    proxy.reset()
                    return
                time.sleep(0.01)

    cutter = threading.Thread(target=cut_when_running, daemon=True)
    cutter.start()
    with pytest.raises(OutcomeUnknown) as info:
        steady.scalar("insert into t select 1 from pg_sleep(1) returning id", deadline=10)
    cutter.join(15)
    assert "may have been applied" in str(info.value)
    assert _rows(pgsteady_database.dsn) == 1
