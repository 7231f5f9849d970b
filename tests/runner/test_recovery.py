"""When PostgreSQL or the network goes away and comes back, a Database recovers by itself,
and calls during the outage fail within their deadline."""

from __future__ import annotations

import time

import pytest

from pgsteady.errors import DeadlineExceeded, QueryFailed
from pgsteady.lab.cluster import Cluster

SLACK = 0.3


def _works_again(db, within: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < within:
        try:
            if db.fetchone("select 1", deadline=1.0) == (1,):
                return time.monotonic() - start
        except (DeadlineExceeded, QueryFailed):
            time.sleep(0.1)
    pytest.fail(f"no answer within {within} s of the outage ending")


def test_recovers_after_postgres_restart(make_db):
    """Calls fail within their deadline while PostgreSQL is down and succeed after restart."""
    with Cluster(pool_size=2, pgbouncer_settings={"server_login_retry": 1}) as cluster:
        db = make_db(cluster.direct_dsn(), pool_size=2, connect_timeout=2,
                     pool_kwargs={"reconnect_timeout": 60})
        db.wait(10)
        cluster.postgres.stop()
        for _ in range(3):
            start = time.monotonic()
            with pytest.raises((DeadlineExceeded, QueryFailed)):
                db.fetchone("select 1", deadline=0.2)
            assert time.monotonic() - start < 0.2 + SLACK
        cluster.postgres.start()
        _works_again(db, within=15)
        assert db.stats().in_flight == 0 or db.stats().running <= 2


def test_recovers_after_blackhole_ends(make_db, pgsteady_proxy):
    """While the network swallows traffic, calls end at their deadline; afterwards they work
    again without a restart."""
    dsn = f"host=127.0.0.1 port={pgsteady_proxy.port} dbname=postgres user=postgres"
    db = make_db(dsn, pool_size=2, connect_timeout=3)
    db.wait(10)
    pgsteady_proxy.blackhole(True)
    for _ in range(3):
        start = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            db.fetchone("select 1", deadline=0.2)
        assert time.monotonic() - start < 0.2 + SLACK
    pgsteady_proxy.blackhole(False)
    _works_again(db, within=15)


def test_recovers_after_pgbouncer_restart(make_db, pgsteady_stack):
    """PgBouncer goes away and comes back on the same port: calls fail fast, then work."""
    cluster = pgsteady_stack(pool_size=2)
    db = make_db(cluster.pooled_dsn(), pool_size=2, pooler="transaction", connect_timeout=2)
    db.wait(10)
    assert db.fetchone("select 1", deadline=2) == (1,)
    cluster.pgbouncer.stop()
    start = time.monotonic()
    with pytest.raises((DeadlineExceeded, QueryFailed)):
        db.fetchone("select 1", deadline=0.2)
    assert time.monotonic() - start < 0.2 + SLACK
    cluster.pgbouncer.start()
    _works_again(db, within=15)
