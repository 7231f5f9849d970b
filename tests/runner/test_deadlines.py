"""A caller's deadline ends its wait, never the query — against a real PgBouncer."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from pgsteady.errors import DeadlineExceeded, Overloaded, PgsteadyError

BUMP = "select nextval('done'), pg_sleep(%s)"


def _bump_sequence(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create sequence done")


def _completed(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        last, called = conn.execute("select last_value, is_called from done").fetchone()
    return last if called else 0


def _server_connections(cluster, dbname: str) -> int:
    pools = [p for p in cluster.pgbouncer.admin("SHOW POOLS") if p["database"] == dbname]
    return sum(p["sv_active"] + p["sv_idle"] + p["sv_used"] + p["sv_tested"] + p["sv_login"]
               for p in pools)


def _settle(db, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while db.stats().in_flight and time.monotonic() < deadline:
        time.sleep(0.02)


def test_seed_step_2_through_pgsteady(make_db, pgsteady_stack, pgsteady_database):
    """PgBouncer pool 1 busy for 1.5 s: a 50 ms caller gets DeadlineExceeded on time, no
    server connection is destroyed, and both queries complete on the server."""
    cluster = pgsteady_stack(pool_size=1, proxy=True)
    _bump_sequence(pgsteady_database.dsn)
    reader = cluster.pgbouncer.log_reader()
    db = make_db(cluster.pooled_dsn(pgsteady_database.name), pool_size=2, pooler="transaction")
    db.wait(10)
    slow = threading.Thread(target=db.fetchone, args=(BUMP, (1.5,)), kwargs={"deadline": 10})
    slow.start()
    time.sleep(0.2)
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded) as info:
        db.fetchone(BUMP, (0,), deadline=0.05)
    waited = time.monotonic() - start
    assert 0.045 <= waited < 1.0  # on its deadline, not after the 1.5 s query (a busy host may lag)
    assert info.value.phase == "running"  # it was queued in PgBouncer, i.e. already sent
    slow.join(10)
    _settle(db)
    time.sleep(0.3)  # PgBouncer writes its log asynchronously
    assert reader.counts().total["not_ready"] == 0
    assert _completed(pgsteady_database.dsn) == 2
    assert _server_connections(cluster, pgsteady_database.name) == 1
    stats = db.stats()
    assert stats.answered == 1
    assert stats.abandoned_completions == 1
    assert stats.deadline_exceeded_running == 1


def test_burst_keeps_every_server_connection(make_db, pgsteady_stack, pgsteady_database):
    """40 callers, 5 ms queries, 50 ms deadlines, pools of 4 behind a 50 ms connect cost:
    no not-ready closures and no new server connections after warm-up."""
    cluster = pgsteady_stack(pool_size=4, min_pool_size=4, proxy=True, connect_delay=0.05)
    _bump_sequence(pgsteady_database.dsn)
    db = make_db(cluster.pooled_dsn(pgsteady_database.name), pool_size=4, pooler="transaction",
                 max_waiting=16)
    db.wait(10)
    cluster.wait_pool_filled(pgsteady_database.name, 4)
    reader = cluster.pgbouncer.log_reader()
    outcomes = {"ok": 0, "deadline": 0, "overloaded": 0}
    lock = threading.Lock()
    stop_at = time.monotonic() + 2.0

    def caller() -> None:
        while time.monotonic() < stop_at:
            try:
                db.fetchone(BUMP, (0.005,), deadline=0.05)
                kind = "ok"
            except DeadlineExceeded:
                kind = "deadline"
            except Overloaded:
                kind = "overloaded"
                time.sleep(0.005)
            with lock:
                outcomes[kind] += 1

    with ThreadPoolExecutor(40) as pool:
        for future in [pool.submit(caller) for _ in range(40)]:
            future.result(30)
    _settle(db)
    time.sleep(0.3)
    counts = reader.counts().total
    assert counts["not_ready"] == 0
    assert counts["server_opened"] == 0
    assert outcomes["ok"] > 100
    stats = db.stats()
    assert stats.accepted == (stats.answered + stats.dropped_before_start
                              + stats.abandoned_completions + stats.failed)
    assert _completed(pgsteady_database.dsn) == stats.answered + stats.abandoned_completions


def test_overloaded_when_the_backlog_is_full(make_db, pgsteady_database):
    """With the worker busy and max_waiting jobs queued, the next call fails at once."""
    db = make_db(pgsteady_database.dsn, pool_size=1, max_waiting=2)
    db.wait(10)
    holders = [threading.Thread(target=db.fetchone, args=("select pg_sleep(0.6)",),
                                kwargs={"deadline": 5}) for _ in range(3)]
    for holder in holders:
        holder.start()
        time.sleep(0.05)
    start = time.monotonic()
    with pytest.raises(Overloaded) as info:
        db.fetchone("select 1", deadline=5)
    assert time.monotonic() - start < 0.3  # at once: not after a 0.6 s holder ends
    assert isinstance(info.value, PgsteadyError)
    assert isinstance(info.value, psycopg.OperationalError)
    for holder in holders:
        holder.join(10)
    assert db.stats().overloaded == 1


def test_dropped_jobs_never_reach_the_database(make_db, pgsteady_database):
    """Jobs whose callers gave up while queued are dropped: the server never runs them."""
    _bump_sequence(pgsteady_database.dsn)
    db = make_db(pgsteady_database.dsn, pool_size=1, max_waiting=10)
    db.wait(10)
    slow = threading.Thread(target=db.fetchone, args=(BUMP, (0.5,)), kwargs={"deadline": 5})
    slow.start()
    time.sleep(0.1)
    for _ in range(5):
        with pytest.raises(DeadlineExceeded) as info:
            db.fetchone(BUMP, (0,), deadline=0.03)
        assert info.value.phase == "queued"
    slow.join(10)
    _settle(db)
    assert _completed(pgsteady_database.dsn) == 1
    stats = db.stats()
    assert stats.dropped_before_start == 5
    assert stats.deadline_exceeded_queued == 5
    assert stats.answered == 1


def test_every_accepted_job_ends_exactly_once(make_db, pgsteady_database):
    """Under a random mix of deadlines, accepted == answered + dropped + abandoned + failed,
    and the server ran exactly the answered and abandoned ones."""
    _bump_sequence(pgsteady_database.dsn)
    db = make_db(pgsteady_database.dsn, pool_size=2, max_waiting=6)
    db.wait(10)
    plan = [(0.002 * (i % 7), [0.001, 0.01, 0.03, 1.0][i % 4]) for i in range(120)]

    def call(sleep_and_deadline: tuple[float, float]) -> str:
        sleep, deadline = sleep_and_deadline
        try:
            db.fetchone(BUMP, (sleep,), deadline=deadline)
        except DeadlineExceeded:
            return "deadline"
        except Overloaded:
            return "overloaded"
        return "ok"

    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(call, plan))
    _settle(db)
    stats = db.stats()
    assert stats.in_flight == 0
    assert stats.answered == results.count("ok")
    assert stats.overloaded == results.count("overloaded")
    assert stats.deadline_exceeded == results.count("deadline")
    assert stats.accepted == len(plan) - stats.overloaded
    assert _completed(pgsteady_database.dsn) == stats.answered + stats.abandoned_completions
    assert stats.failed == 0
