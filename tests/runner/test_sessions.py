"""Session hygiene: timeouts and labels reach the server in every pooler mode, without leaks."""

from __future__ import annotations

import socket
import threading
import time

import psycopg
import pytest

from pgsteady.errors import DatabaseClosed, PgsteadyError, QueryFailed, UsageError
from pgsteady.runner import Database

SHOW = ("select current_setting('statement_timeout'), current_setting('lock_timeout'), "
        "current_setting('idle_in_transaction_session_timeout'), "
        "current_setting('application_name')")


@pytest.mark.parametrize("mode", ["direct", "session", "transaction"])
def test_timeouts_and_label_in_every_mode(make_db, pgsteady_stack, pgsteady_database, mode):
    """statement/lock/idle timeouts and application_name service@host:pid are in force."""
    if mode == "direct":
        dsn = pgsteady_database.dsn
    else:
        dsn = pgsteady_stack(pool_mode=mode, pool_size=2).pooled_dsn(pgsteady_database.name)
    db = make_db(dsn, pool_size=1, pooler=mode, service="orders", statement_timeout=7,
                 lock_timeout=0.25, idle_in_transaction_timeout=9)
    stmt, lock, idle, label = db.fetchone(SHOW, deadline=10)
    assert (stmt, lock, idle) == ("7s", "250ms", "9s")
    assert label.startswith(f"orders@{socket.gethostname()}"[:63])
    assert label.endswith(f":{__import__('os').getpid()}") or len(label) == 63


def test_transaction_mode_settings_do_not_leak(make_db, pgsteady_stack, pgsteady_database):
    """Behind a transaction pooler, SET LOCAL stays in pgsteady's transaction: a plain client
    sharing the same single server connection sees the server's defaults."""
    cluster = pgsteady_stack(pool_size=1)
    dsn = cluster.pooled_dsn(pgsteady_database.name)
    db = make_db(dsn, pool_size=1, pooler="transaction", statement_timeout=7)
    assert db.fetchone(SHOW, deadline=10)[0] == "7s"
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as other:
        assert other.execute("show statement_timeout").fetchone() == ("0",)


def test_statement_timeout_stops_an_abandoned_query(make_db, pgsteady_database):
    """The backstop: a query whose caller left is still stopped by statement_timeout."""
    db = make_db(pgsteady_database.dsn, pool_size=1, statement_timeout=0.3)
    start = time.monotonic()
    with pytest.raises(psycopg.errors.QueryCanceled):
        db.fetchone("select pg_sleep(5)", deadline=10)
    assert time.monotonic() - start < 2
    assert db.stats().failed == 1


def test_sql_errors_pass_through_unchanged(make_db, pgsteady_database):
    """The server's own errors reach the caller as psycopg raised them."""
    db = make_db(pgsteady_database.dsn, pool_size=1)
    with pytest.raises(psycopg.errors.DivisionByZero):
        db.fetchone("select 1/0", deadline=5)
    assert db.fetchone("select 2", deadline=5) == (2,)


def test_connection_failures_are_wrapped(make_db, pgsteady_database, pgsteady_postgres):
    """A connection killed under a job surfaces as QueryFailed with the driver's error as
    __cause__; the next call works on a fresh connection."""
    db = make_db(pgsteady_database.dsn, pool_size=1, service="victim")
    db.wait(10)
    pid = db.fetchone("select pg_backend_pid()", deadline=5)[0]
    with psycopg.connect(pgsteady_postgres.dsn(), autocommit=True) as admin:
        killer = threading.Timer(0.2, admin.execute, args=("select pg_terminate_backend(%s)",
                                                          (pid,)))
        killer.start()
        with pytest.raises(QueryFailed) as info:
            db.fetchone("select pg_sleep(2)", deadline=5)
        killer.join()
    assert isinstance(info.value.__cause__, psycopg.Error)
    assert isinstance(info.value, PgsteadyError)
    assert db.fetchone("select 3", deadline=10) == (3,)


def test_bad_arguments_are_usage_errors():
    """Nonsense sizes, modes and durations are refused with one clear message."""
    with pytest.raises(UsageError, match="pool_size"):
        Database("dbname=x", pool_size=0, open=False)
    with pytest.raises(UsageError, match="pooler"):
        Database("dbname=x", pooler="pgbouncer", open=False)
    with pytest.raises(UsageError, match="statement_timeout"):
        Database("dbname=x", statement_timeout=-1, open=False)


def test_caller_mistakes_are_not_connection_failures(make_db, pgsteady_database):
    """A wrong placeholder count is the caller's ProgrammingError, not a QueryFailed."""
    db = make_db(pgsteady_database.dsn, pool_size=1)
    with pytest.raises(psycopg.ProgrammingError) as info:
        db.fetchone("select %s, %s", (1,), deadline=5)
    assert not isinstance(info.value, QueryFailed)
    assert db.fetchone("select 4", deadline=5) == (4,)


def test_zero_timeouts_mean_no_limit(make_db, pgsteady_database):
    """0 is PostgreSQL's "no limit", not 1 ms; None means the same."""
    db = make_db(pgsteady_database.dsn, pool_size=1, statement_timeout=0, lock_timeout=None)
    assert db.fetchone(SHOW, deadline=10)[:2] == ("0", "0")
    assert db.fetchone("select pg_sleep(0.05), 1", deadline=10)[1] == 1


def test_max_waiting_must_leave_room_for_a_job():
    """max_waiting=0 would refuse every call; it is a usage error instead."""
    with pytest.raises(UsageError, match="max_waiting must be at least 1"):
        Database("dbname=x", max_waiting=0, open=False)


def test_calls_before_open_fail_at_once():
    """A Database that was never opened refuses calls instead of hanging."""
    db = Database("dbname=x", open=False)
    with pytest.raises(DatabaseClosed, match="not open yet"):
        db.fetchone("select 1", deadline=None)
