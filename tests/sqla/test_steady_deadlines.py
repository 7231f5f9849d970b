"""Steady / AsyncSteady: a deadline ends the caller's wait, never the job — on real servers."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from sqlalchemy.exc import DBAPIError

from pgsteady.errors import CircuitOpen, DeadlineExceeded, Overloaded
from pgsteady.guards.breaker import CircuitBreaker

BUMP = "select nextval('done') from pg_sleep({})"


def _prepare(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create sequence done")
        conn.execute("create table accounts (id int primary key, balance int not null)")
        conn.execute("insert into accounts values (1, 100), (2, 0)")


def _completed(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        last, called = conn.execute("select last_value, is_called from done").fetchone()
    return last if called else 0


def _balances(dsn: str) -> list[tuple[int, int]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("select id, balance from accounts order by id").fetchall()


def _settle(steady, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while steady.stats().in_flight and time.monotonic() < end:
        time.sleep(0.02)


def _in_background(steady, *statements: str, deadline: float = 5.0) -> threading.Thread:
    thread = threading.Thread(target=steady.run_sql, args=statements,
                              kwargs={"deadline": deadline})
    thread.start()
    return thread


def test_run_commits_when_fn_returns_and_rolls_back_when_it_raises(make_steady,
                                                                   pgsteady_database):
    """fn's statements commit together; an error in fn rolls every one of them back."""
    _prepare(pgsteady_database.dsn)
    steady = make_steady(pgsteady_database.dsn)
    moved = steady.run_sql("update accounts set balance = balance - 30 where id = 1",
                           "update accounts set balance = balance + 30 where id = 2",
                           "select balance from accounts where id = 2")
    assert moved == 30
    assert _balances(pgsteady_database.dsn) == [(1, 70), (2, 30)]
    with pytest.raises(DBAPIError) as info:
        steady.run_sql("update accounts set balance = 0 where id = 1", "select 1/0")
    assert isinstance(info.value.orig, psycopg.errors.DivisionByZero)
    assert _balances(pgsteady_database.dsn) == [(1, 70), (2, 30)]
    stats = steady.stats()
    assert (stats.answered, stats.failed) == (1, 1)
    assert steady.pool_idle() == 1  # both connections went back to the pool


def test_deadline_while_queued_drops_the_job_untouched(make_steady, pgsteady_database):
    """A job whose caller left while every slot was busy never reaches the database."""
    _prepare(pgsteady_database.dsn)
    steady = make_steady(pgsteady_database.dsn, max_waiting=10)
    slow = _in_background(steady, BUMP.format(0.5))
    time.sleep(0.15)
    for _ in range(3):
        with pytest.raises(DeadlineExceeded) as info:
            steady.run_sql(BUMP.format(0), deadline=0.05)
        assert info.value.phase == "queued"
    slow.join(10)
    _settle(steady)
    assert _completed(pgsteady_database.dsn) == 1
    stats = steady.stats()
    assert (stats.dropped_before_start, stats.deadline_exceeded_queued, stats.answered) == (3, 3, 1)


def test_deadline_while_connecting_keeps_the_new_connection(make_steady, pgsteady_database,
                                                            pgsteady_postgres, pgsteady_proxy):
    """A caller that leaves while the pool opens a slow connection gets phase 'connecting';
    the job is then dropped and the connection, once open, stays in the pool."""
    _prepare(pgsteady_database.dsn)
    pgsteady_proxy.set_connect_delay(0.6)
    dsn = pgsteady_postgres.dsn(pgsteady_database.name, port=pgsteady_proxy.port)
    steady = make_steady(dsn)
    with pytest.raises(DeadlineExceeded) as info:
        steady.run_sql(BUMP.format(0), deadline=0.2)
    assert info.value.phase == "connecting"
    _settle(steady)
    stats = steady.stats()
    assert (stats.dropped_before_start, stats.deadline_exceeded_connecting) == (1, 1)
    assert _completed(pgsteady_database.dsn) == 0
    assert steady.pool_idle() == 1  # opened, kept, not closed
    pgsteady_proxy.set_connect_delay(0)
    assert steady.scalar("select 7") == 7
    assert pgsteady_proxy.stats().connections == 1  # the same connection


def test_deadline_while_running_still_commits(make_steady, pgsteady_database):
    """A started job runs to its end and commits after its caller left."""
    _prepare(pgsteady_database.dsn)
    steady = make_steady(pgsteady_database.dsn)
    with pytest.raises(DeadlineExceeded) as info:
        steady.run_sql("select pg_sleep(0.3)",
                       "update accounts set balance = balance - 30 where id = 1",
                       "update accounts set balance = balance + 30 where id = 2",
                       deadline=0.05)
    assert info.value.phase == "running"
    _settle(steady)
    assert steady.stats().abandoned_completions == 1
    assert _balances(pgsteady_database.dsn) == [(1, 70), (2, 30)]
    assert steady.pool_idle() == 1


def test_overloaded_when_the_backlog_is_full(make_steady, pgsteady_database):
    """With the slot busy and max_waiting jobs queued, the next call fails at once."""
    steady = make_steady(pgsteady_database.dsn, max_waiting=1)
    holders = []
    for _ in range(2):  # one runs, one waits
        holders.append(_in_background(steady, "select pg_sleep(0.5)"))
        time.sleep(0.1)
    with pytest.raises(Overloaded):
        steady.scalar("select 1")
    for holder in holders:
        holder.join(10)
    assert steady.stats().overloaded == 1


def test_breaker_opens_on_deadlines_and_fails_fast(make_steady, pgsteady_database):
    """Deadlines count as failures; once open, calls raise CircuitOpen without a job."""
    breaker = CircuitBreaker("orders-db", min_calls=2, failure_rate=0.5, open_for=30)
    steady = make_steady(pgsteady_database.dsn, breaker=breaker)
    for _ in range(2):
        with pytest.raises(DeadlineExceeded):
            steady.scalar("select pg_sleep(0.2)", deadline=0.02)
    _settle(steady)
    with pytest.raises(CircuitOpen) as info:
        steady.scalar("select 1")
    assert info.value.name == "orders-db"
    assert steady.stats().accepted == 2
    breaker.reset()
    assert steady.scalar("select 1") == 1


def test_zero_deadline_fails_at_once_and_sends_nothing(make_steady, pgsteady_database):
    """deadline=0 is 'no time at all': DeadlineExceeded (queued), no job started."""
    _prepare(pgsteady_database.dsn)
    steady = make_steady(pgsteady_database.dsn)
    with pytest.raises(DeadlineExceeded) as info:
        steady.run_sql(BUMP.format(0), deadline=0)
    assert info.value.phase == "queued"
    assert _completed(pgsteady_database.dsn) == 0
