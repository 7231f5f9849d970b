"""Behind PgBouncer while PostgreSQL is down, PgBouncer refuses a statement before any server
sees it: that is a QueryFailed saying a retry is safe, never OutcomeUnknown; a statement cut
off after a server received it stays OutcomeUnknown."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from pgsteady.errors import OutcomeUnknown, QueryFailed
from pgsteady.lab.cluster import Cluster
from pgsteady.lab.proxy import FaultProxy

REFUSALS = ("server login has been failing", "query_wait_timeout")


def postgres_gone(cluster: Cluster, dbname: str) -> None:
    """PostgreSQL stops answering PgBouncer: the proxy between them stops (its port refuses
    connections) and PgBouncer has let go of every server connection."""
    assert isinstance(cluster.proxy, FaultProxy)
    cluster.proxy.stop()
    for _ in range(200):
        if cluster.server_connections(dbname) == 0:
            return
        time.sleep(0.05)
    pytest.fail("PgBouncer kept its server connections after PostgreSQL went away")


def rows(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("select count(*) from t").fetchone()
    assert row is not None
    return int(row[0])


def refused_writes(write: Any, tries: int = 6) -> list[QueryFailed]:
    """Each write's error, checked to be a QueryFailed; the list of them."""
    errors = []
    for i in range(1, tries + 1):
        with pytest.raises(QueryFailed) as info:
            write(i)
        errors.append(info.value)
    return errors


def check_refusals(errors: list[QueryFailed]) -> None:
    for error in errors:
        assert not isinstance(error, OutcomeUnknown), str(error)
        assert "safe to retry" in str(error)
        assert "before any server saw it" in str(error)
        assert any(refusal in str(error) for refusal in REFUSALS), str(error)
    assert any("server login has been failing" in str(error) for error in errors)


def test_pgbouncer_refusing_while_postgres_is_down_is_not_outcome_unknown(
        make_db, pgsteady_stack, pgsteady_database):
    """Database and AsyncDatabase: every write PgBouncer refuses while PostgreSQL is down
    fails as a QueryFailed that says nothing was applied (none was), and stats count no
    unknown outcome."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table t (id int primary key)")
    cluster = pgsteady_stack(pool_size=2, proxy=True, query_wait_timeout=1)
    db = make_db(cluster.pooled_dsn(pgsteady_database.name), pool_size=2,
                 pooler="transaction")
    db.execute("insert into t values (0)", deadline=10)
    postgres_gone(cluster, pgsteady_database.name)
    errors = refused_writes(
        lambda i: db.execute(f"insert into t values ({i})", deadline=10))
    check_refusals(errors)
    assert db.stats().outcome_unknown == 0
    assert rows(pgsteady_database.dsn) == 1
