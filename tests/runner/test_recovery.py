"""When PostgreSQL or the network goes away and comes back, a Database recovers by itself,
and calls during the outage fail within their deadline."""

from __future__ import annotations

import time

import pytest

from pgsteady.errors import CannotConnect, DeadlineExceeded, QueryFailed
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


def test_recovers_after_blackhole_ends(make_db, pgsteady_proxy, pgsteady_postgres):
    """While the network swallows traffic, calls end at their deadline; afterwards they work
    again without a restart."""
    dsn = pgsteady_postgres.dsn(port=pgsteady_proxy.port)
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


def test_a_failed_wait_leaves_the_database_usable(make_db, pgsteady_proxy, pgsteady_postgres):
    """wait() timing out while the network is black-holed raises CannotConnect, and the
    Database connects by itself once the network is back."""
    pgsteady_proxy.blackhole(True)
    dsn = pgsteady_postgres.dsn(port=pgsteady_proxy.port)
    db = make_db(dsn, pool_size=1, connect_timeout=2)
    with pytest.raises(CannotConnect, match="keeps trying"):
        db.wait(0.5)
    pgsteady_proxy.blackhole(False)
    _works_again(db, within=20)


def test_idle_workers_do_not_pile_up_waiters(monkeypatch, pgsteady_database):
    """Quiet periods leave no stale idle futures behind in the async runner."""
    import asyncio

    from pgsteady import _core
    from pgsteady.arunner import AsyncDatabase

    monkeypatch.setattr(_core, "HOLD_IDLE", 0.02)

    async def scenario() -> int:
        async with AsyncDatabase(pgsteady_database.dsn, pool_size=2) as db:
            for _ in range(10):
                await db.fetchone("select 1", deadline=5)
                await asyncio.sleep(0.05)  # longer than HOLD_IDLE: workers go quiet
            return len(db._idle_holding) + len(db._idle_empty)

    assert asyncio.run(scenario()) <= 2


def test_recovers_through_pgbouncer_within_seconds_of_postgres(make_db):
    """Behind the lab's PgBouncer (server_login_retry = 1, PgBouncer's default is 15 s), calls
    are answered again within a few seconds of PostgreSQL coming back, not after ~13 s."""
    with Cluster(pool_size=2) as cluster:
        config = {r["key"]: r["value"] for r in cluster.pgbouncer.admin("SHOW CONFIG")}
        assert config["server_login_retry"] == "1"
        db = make_db(cluster.pooled_dsn(), pool_size=2, pooler="transaction", connect_timeout=2)
        db.wait(10)
        cluster.postgres.stop()
        for _ in range(3):  # PgBouncer's logins fail while PostgreSQL is down
            with pytest.raises((DeadlineExceeded, QueryFailed)):
                db.fetchone("select 1", deadline=0.5)
            time.sleep(0.3)
        cluster.postgres.start()
        assert _works_again(db, within=15) < 6


def test_a_deadline_passed_waiting_for_a_connection_says_so(make_db, pgsteady_proxy,
                                                            pgsteady_postgres):
    """No connection can be made (the network swallows every attempt): a call that ends at its
    deadline says it was waiting for a connection, whichever of the worker's wait and the
    caller's ends first (it said "queued in pgsteady" when the worker's ended first)."""
    pgsteady_proxy.blackhole(True)
    db = make_db(pgsteady_postgres.dsn(port=pgsteady_proxy.port), pool_size=2,
                 connect_timeout=2)
    phases = []
    for _ in range(4):
        with pytest.raises(DeadlineExceeded) as info:
            db.fetchone("select 1", deadline=1.0)
        phases.append(info.value.phase)
        assert "waiting for a connection" in str(info.value)
    assert phases == ["connecting"] * 4
    stats = db.stats()
    assert stats.deadline_exceeded_connecting == 4 and stats.deadline_exceeded_queued == 0
    pgsteady_proxy.blackhole(False)
