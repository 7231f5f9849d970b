"""CircuitBreaker: its state machine, and what a Database counts as a failure."""

from __future__ import annotations

import asyncio
import logging
import time

import psycopg
import pytest

from pgsteady import AsyncDatabase, Database
from pgsteady.errors import CircuitOpen, DeadlineExceeded, UsageError
from pgsteady.guards import CircuitBreaker


def _fail(breaker: CircuitBreaker, times: int) -> None:
    for _ in range(times):
        with pytest.raises(OSError), breaker:
            raise OSError("no route to host")


def test_opens_at_the_failure_rate_and_fails_fast():
    """Below min_calls nothing opens; at the rate it opens and rejects without calling."""
    breaker = CircuitBreaker("t", failure_rate=0.5, min_calls=4, open_for=5)
    assert breaker.call(lambda: 1) == 1
    _fail(breaker, 2)
    assert breaker.state == "closed"  # 2 of 3: under min_calls
    _fail(breaker, 1)
    assert breaker.state == "open"
    called = []
    start = time.monotonic()
    with pytest.raises(CircuitOpen) as info:
        breaker.call(called.append, 1)
    assert time.monotonic() - start < 0.05  # no wait at all
    assert called == []
    assert 4 < info.value.retry_after <= 5
    assert breaker.stats().rejected == 1 and breaker.stats().opened == 1


def test_half_open_trial_closes_or_reopens():
    """After open_for one trial goes through: a failure re-opens, a success closes."""
    breaker = CircuitBreaker("t", min_calls=2, open_for=0.1, half_open_calls=1)
    _fail(breaker, 2)
    time.sleep(0.12)
    assert breaker.state == "half-open"
    _fail(breaker, 1)
    assert breaker.state == "open"
    time.sleep(0.12)
    ticket = breaker.allow()
    with pytest.raises(CircuitOpen):  # only one trial at a time
        breaker.allow()
    breaker.settle(ticket, "success")
    assert breaker.state == "closed"
    stats = breaker.stats()
    assert (stats.opened, stats.half_opened, stats.closed) == (2, 2, 1)


def test_window_forgets_old_failures():
    """Failures older than the window do not count towards opening."""
    breaker = CircuitBreaker("t", min_calls=3, window=0.2)
    _fail(breaker, 2)
    time.sleep(0.25)
    _fail(breaker, 1)
    assert breaker.state == "closed"
    assert breaker.stats().window_failures == 1


def test_exceptions_outside_failure_on_count_as_answers():
    """With failure_on=(OSError,), a ValueError is an answer, not a failure."""
    breaker = CircuitBreaker("t", min_calls=2, failure_on=(OSError,))
    for _ in range(5):
        with pytest.raises(ValueError):
            breaker.call(int, "x")
    assert breaker.state == "closed"


def test_state_changes_are_logged(caplog):
    """Opening logs a warning naming the breaker."""
    breaker = CircuitBreaker("orders-db", min_calls=1)
    with caplog.at_level(logging.INFO, logger="pgsteady.guards"):
        _fail(breaker, 1)
    assert any("orders-db" in r.message and "open" in r.message for r in caplog.records)


def test_bad_arguments_are_usage_errors():
    """Nonsense settings fail at construction with a UsageError."""
    with pytest.raises(UsageError):
        CircuitBreaker("t", failure_rate=0)
    with pytest.raises(UsageError):
        CircuitBreaker("t", open_for=-1)


def test_acall_shares_the_state():
    """acall counts failures like call, and rejects while open."""
    breaker = CircuitBreaker("t", min_calls=2)

    async def boom() -> None:
        raise ConnectionError

    async def main() -> None:
        for _ in range(2):
            with pytest.raises(ConnectionError):
                await breaker.acall(boom)
        with pytest.raises(CircuitOpen):
            await breaker.acall(boom)

    asyncio.run(main())


def test_statement_errors_never_open_a_database_breaker(pgsteady_database):
    """Division by zero and statement_timeout are the caller's errors: the breaker stays shut."""
    breaker = CircuitBreaker("pg", min_calls=3)
    with Database(pgsteady_database.dsn, pool_size=1, breaker=breaker) as db:
        for _ in range(5):
            with pytest.raises(psycopg.errors.DivisionByZero):
                db.fetchone("select 1/0", deadline=5)
        db.execute("set statement_timeout = '10ms'", deadline=5)
        with pytest.raises(psycopg.errors.QueryCanceled):
            db.fetchone("select pg_sleep(1)", deadline=5)
        assert breaker.state == "closed"
        assert breaker.stats().failures == 0 and breaker.stats().calls == 7


def test_blackholed_database_opens_the_breaker(pgsteady_proxy):
    """Deadlines that pass on a connection count as failures: a black hole opens the breaker,
    after which calls fail with CircuitOpen at once (sync and async)."""
    dsn = f"host=127.0.0.1 port={pgsteady_proxy.port} dbname=postgres user=postgres"
    breaker = CircuitBreaker("pg", min_calls=3, open_for=30)
    with Database(dsn, pool_size=2, breaker=breaker, connect_timeout=2) as db:
        db.wait(10)
        pgsteady_proxy.blackhole(True)
        for _ in range(3):
            with pytest.raises(DeadlineExceeded):
                db.fetchone("select 1", deadline=0.1)
        assert breaker.state == "open"
        start = time.monotonic()
        with pytest.raises(CircuitOpen):
            db.fetchone("select 1", deadline=0.1)
        assert time.monotonic() - start < 0.05  # no wait at all (the deadline is 0.1 s)
        pgsteady_proxy.blackhole(False)

    async def main() -> None:
        async with AsyncDatabase(dsn, pool_size=2, breaker=breaker) as adb:
            with pytest.raises(CircuitOpen):
                await adb.fetchone("select 1", deadline=1)
            breaker.reset()
            assert await adb.fetchone("select 1", deadline=5) == (1,)

    asyncio.run(main())


def test_consecutive_failures_open_despite_a_low_rate(caplog):
    """consecutive_failures=2 opens after two failures in a row even after 100 successes;
    a probe that fails again re-opens it without a second warning."""
    breaker = CircuitBreaker("redis", consecutive_failures=2, open_for=0.05)
    for _ in range(100):
        breaker.call(lambda: None)
    _fail(breaker, 1)
    breaker.call(lambda: None)  # a success breaks the streak
    _fail(breaker, 1)
    assert breaker.state == "closed"
    with caplog.at_level(logging.INFO, logger="pgsteady.guards"):
        _fail(breaker, 1)
        assert breaker.state == "open"
        time.sleep(0.06)
        _fail(breaker, 1)  # the half-open trial
        assert breaker.state == "open"
    assert [r.levelname for r in caplog.records if "-> open" in r.message] == \
        ["WARNING", "INFO"]
    with pytest.raises(UsageError):
        CircuitBreaker("t", consecutive_failures=0)
