"""An exception raised into a waiting caller (a signal handler's, as signal-based timeouts and
Celery's soft time limit raise) is the caller leaving: its statement finishes on a worker, the
connection comes back clean, and the next calls succeed (issue 37)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from pgsteady.arunner import AsyncDatabase
from pgsteady.runner import Database

SLOW_INSERT = "insert into hits select 1 from pg_sleep(1.0)"


class Alarm(Exception):
    """What a signal-based timeout raises (Celery's SoftTimeLimitExceeded is an Exception)."""


@contextmanager
def alarm_after(seconds: float, raised: list[float]) -> Iterator[None]:
    """SIGALRM after ``seconds``; its handler records when it raised :class:`Alarm`."""
    def handler(signum: int, frame: Any) -> None:
        raised.append(time.monotonic())
        raise Alarm

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _table(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table hits (n int)")


def _hits(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select count(*) from hits").fetchone()
    assert row is not None
    return int(row[0])


def _settle(stats: Any, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while stats().in_flight and time.monotonic() < end:
        time.sleep(0.02)


def _left_at_once(call: Any) -> None:
    """``call()`` is interrupted by a signal 0.1 s in; its caller gets Alarm within 0.1 s."""
    raised: list[float] = []
    with alarm_after(0.1, raised), pytest.raises(Alarm):
        call()
    left = time.monotonic()
    assert len(raised) == 1
    assert left - raised[0] < 0.1  # at once, not when the 1 s statement ends


@pytest.mark.parametrize("call,direct", [("execute", True), ("execute", False), ("run", False)],
                         ids=["statement-caller-runs", "statement-hand-off", "run"])
def test_a_signal_raised_into_a_database_call_leaves_the_statement_to_finish(
        pgsteady_stack, pgsteady_database, call, direct):
    """Behind PgBouncer: the caller leaves with its own exception at once, the write commits,
    the next 20 calls succeed and no server connection is closed not-ready."""
    cluster = pgsteady_stack(pool_size=2)
    _table(pgsteady_database.dsn)
    reader = cluster.pgbouncer.log_reader()
    with Database(cluster.pooled_dsn(pgsteady_database.name), pool_size=2,
                  pooler="transaction") as db:
        db._direct = direct
        db.wait(10)
        assert db.fetchone("select 1", deadline=10) == (1,)  # a worker holds a connection
        if call == "execute":
            _left_at_once(lambda: db.execute(SLOW_INSERT, deadline=10))
        else:
            _left_at_once(lambda: db.run(lambda conn: conn.execute(SLOW_INSERT), deadline=10))
        for i in range(20):
            assert db.fetchone("select %s::int", (i,), deadline=10) == (i,)
        _settle(db.stats)
        stats = db.stats()
    assert _hits(pgsteady_database.dsn) == 1
    assert (stats.interrupted, stats.abandoned_completions, stats.failed) == (1, 1, 0)
    assert stats.answered == 21
    time.sleep(0.3)  # PgBouncer writes its log asynchronously
    assert reader.counts().total["not_ready"] == 0


def test_a_signal_raised_into_a_steady_call_leaves_the_job_to_finish(
        pgsteady_stack, pgsteady_database):
    """Steady, behind PgBouncer: the same for a session job and a one-statement call."""
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from pgsteady.sqlalchemy import Steady, url_from_dsn

    cluster = pgsteady_stack(pool_size=2)
    _table(pgsteady_database.dsn)
    reader = cluster.pgbouncer.log_reader()
    engine = sqlalchemy.create_engine(url_from_dsn(cluster.pooled_dsn(pgsteady_database.name)),
                                      pool_size=2, max_overflow=0)
    slow = sqlalchemy.text(SLOW_INSERT)
    with Steady(engine, pooler="transaction") as steady:
        _left_at_once(lambda: steady.run(lambda session: session.execute(slow), deadline=10))
        _left_at_once(lambda: steady.execute(slow, deadline=10))
        for i in range(20):
            assert steady.scalar(sqlalchemy.text(f"select {i}"), deadline=10) == i
        _settle(steady.stats)
        stats = steady.stats()
    engine.dispose()
    assert _hits(pgsteady_database.dsn) == 2
    assert (stats.interrupted, stats.abandoned_completions, stats.failed) == (2, 2, 0)
    time.sleep(0.3)
    assert reader.counts().total["not_ready"] == 0


@pytest.mark.parametrize("kind", ["database", "steady"])
def test_a_cancelled_async_caller_leaves_the_job_to_finish(
        pgsteady_stack, pgsteady_database, kind):
    """AsyncDatabase and AsyncSteady: a caller's task cancelled mid-statement is counted as
    interrupted, the write commits, the next 20 calls succeed, nothing is closed not-ready."""
    cluster = pgsteady_stack(pool_size=2)
    _table(pgsteady_database.dsn)
    reader = cluster.pgbouncer.log_reader()
    dsn = cluster.pooled_dsn(pgsteady_database.name)

    async def scenario() -> Any:
        if kind == "database":
            db: Any = AsyncDatabase(dsn, pool_size=2, pooler="transaction")
            await db.open()
            slow, one = db.execute(SLOW_INSERT, deadline=10), db.fetchone
        else:
            sqlalchemy = pytest.importorskip("sqlalchemy")
            from sqlalchemy.ext.asyncio import create_async_engine

            from pgsteady.sqlalchemy import AsyncSteady, url_from_dsn
            engine = create_async_engine(url_from_dsn(dsn), pool_size=2, max_overflow=0)
            db = AsyncSteady(engine, pooler="transaction")
            slow = db.execute(sqlalchemy.text(SLOW_INSERT), deadline=10)

            async def one(statement: str, params: Any, deadline: float) -> Any:
                return (await db.execute(sqlalchemy.text(statement.replace("%s", str(
                    params[0]))), deadline=deadline)).one()
        task = asyncio.create_task(slow)
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for i in range(20):
            assert tuple(await one("select %s::int", (i,), deadline=10)) == (i,)
        end = time.monotonic() + 10
        while db.stats().in_flight and time.monotonic() < end:
            await asyncio.sleep(0.02)
        stats = db.stats()
        await db.close()
        if kind == "steady":
            await engine.dispose()
        return stats

    stats = asyncio.run(scenario())
    assert _hits(pgsteady_database.dsn) == 1
    assert (stats.interrupted, stats.abandoned_completions, stats.failed) == (1, 1, 0)
    time.sleep(0.3)
    assert reader.counts().total["not_ready"] == 0


def test_a_connection_left_mid_statement_outside_the_wait_is_settled_not_lent(
        pgsteady_database):
    """The caller's thread leaves after its statement was sent but outside the socket wait
    (an exception in between): the connection is not lent again until its worker has read
    the statement's results; it commits, and the same session serves the next calls."""
    dsn = pgsteady_database.dsn
    _table(dsn)
    with Database(dsn, pool_size=1) as db:
        db.wait(10)
        pid = db.fetchone("select pg_backend_pid()", deadline=10)

        def sent_then_left(conn: psycopg.Connection[Any], job: Any) -> Any:
            conn.pgconn.send_query(b"insert into hits select 1 from pg_sleep(0.3)")
            conn.pgconn.flush()
            raise Alarm

        with pytest.raises(Alarm):
            db._call(sent_then_left, 10, single=True)
        for _ in range(20):
            assert db.fetchone("select pg_backend_pid()", deadline=10) == pid
        stats = db.stats()
    assert _hits(dsn) == 1
    assert (stats.failed, stats.answered) == (1, 21)


@pytest.mark.parametrize("direct", [True, False], ids=["caller-runs", "hand-off"])
def test_a_caller_that_left_by_a_signal_is_neutral_for_the_breaker(pgsteady_database, direct):
    """The database said nothing about a call its caller left by an exception raised into the
    wait (an Exception, as a soft time limit is): the breaker counts it neither way."""
    from pgsteady.guards.breaker import CircuitBreaker

    breaker = CircuitBreaker("interrupts")
    with Database(pgsteady_database.dsn, pool_size=1, breaker=breaker) as db:
        db._direct = direct
        db.wait(10)
        assert db.fetchone("select 1", deadline=10) == (1,)
        _left_at_once(lambda: db.fetchone("select pg_sleep(1.0)", deadline=10))
        assert breaker.stats().calls == 1  # the first call only
        assert db.fetchone("select 2", deadline=10) == (2,)
        _settle(db.stats)
    assert breaker.stats().calls == 2
    assert breaker.stats().failures == 0
