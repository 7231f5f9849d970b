"""Bad arguments are refused before anything is queued; a caller leaving any way is a caller
leaving; transaction-pooler limits and PostgreSQL's DETAIL reach the caller clearly."""

from __future__ import annotations

import asyncio
import logging
import math
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest

from pgsteady import AsyncDatabase, Database, DeadlineExceeded
from pgsteady.errors import UsageError
from pgsteady.lab import _process
from pgsteady.lab.cluster import Postgres, make_workdir
from pgsteady.settings import describe


def _table(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table t (id int primary key)")


def _rows(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select count(*) from t").fetchone()
    return int(row[0]) if row else -1


def _settle(db) -> None:
    deadline = time.monotonic() + 10
    while db.stats().in_flight and time.monotonic() < deadline:
        time.sleep(0.02)


def test_infinite_deadline_means_none_and_huge_one_is_refused_before_queueing(
        make_db, pgsteady_database):
    """deadline=inf waits as long as it takes; deadline=1e300 is a UsageError before the job
    is queued: nothing runs, nothing is counted."""
    _table(pgsteady_database.dsn)
    db = make_db(pgsteady_database.dsn, pool_size=1)
    assert db.fetchone("select 1", deadline=math.inf) == (1,)
    accepted = db.stats().accepted
    with pytest.raises(UsageError, match="deadline must be at most"):
        db.execute("insert into t values (1)", deadline=1e300)
    _settle(db)
    assert db.stats().accepted == accepted
    assert _rows(pgsteady_database.dsn) == 0


@pytest.mark.parametrize(("running", "warm"), [(False, False), (True, False), (True, True)],
                         ids=["queued", "running", "running-on-the-callers-thread"])
def test_ctrl_c_while_waiting_is_a_caller_leaving(pgsteady_database, running, warm):
    """KeyboardInterrupt while a call waits: a queued job is dropped and never commits; a
    running one completes, counted as abandoned, never as answered — also when the caller
    runs the statement itself on the idle worker's connection (``warm``)."""
    _table(pgsteady_database.dsn)
    db = Database(pgsteady_database.dsn, pool_size=1)
    try:
        db.wait(10)
        if warm:  # the worker now holds its connection, idle: the next call borrows it
            db.fetchone("select 1")
            assert db._idle_holding
        if not running:
            busy = threading.Thread(target=db.execute, args=("select pg_sleep(0.6)",))
            busy.start()
            time.sleep(0.1)
        statement = "insert into t select 1 from pg_sleep(0.4)" if running \
            else "insert into t values (1)"
        # A real SIGINT to the main thread, as Ctrl-C is (interrupt_main would not wake a
        # blocked wait).
        main = threading.main_thread().ident
        assert main is not None
        # Python leaves SIGINT ignored when it starts with it ignored (a run started with
        # `&` by a script, as CI may start it): give it Python's own Ctrl-C for this test.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT)).start()
            with pytest.raises(KeyboardInterrupt):
                db.execute(statement, deadline=30)
        finally:
            signal.signal(signal.SIGINT, previous)
        if not running:
            busy.join(10)
        _settle(db)
        stats = db.stats()
        assert _rows(pgsteady_database.dsn) == (1 if running else 0)
        if running:
            assert stats.abandoned_completions == 1 and stats.answered == int(warm)
        else:
            assert stats.dropped_before_start == 1 and stats.answered == 1
    finally:
        db.close()


@pytest.mark.parametrize("kind", [Database, AsyncDatabase])
@pytest.mark.parametrize(("args", "kwargs", "match"), [
    (("host=127.0.0.1 no_such_option=1",), {}, "not a valid libpq connection string"),
    (("postgresql://u:secret@[::1/db",), {}, "not a valid libpq connection string"),
    ((None,), {}, "conninfo must be a string"),
    (("dbname=x",), {"pool_size": "4"}, "pool_size must be a whole number"),
    (("dbname=x",), {"max_waiting": 2.5}, "max_waiting must be a whole number"),
    (("dbname=x",), {"deadline": "50ms"}, "deadline must be seconds"),
    (("dbname=x",), {"statement_timeout": True}, "statement_timeout must be seconds"),
    (("dbname=x",), {"statement_timeout": 1e10}, "statement_timeout must be at most"),
    (("dbname=x",), {"lock_timeout": -1}, "lock_timeout must be a non-negative"),
    (("dbname=x",), {"deadline": 1e300}, "deadline must be at most"),
    (("dbname=x",), {"pooler": 3}, "pooler must be"),
])
def test_bad_arguments_fail_at_construction(kind, args, kwargs, match):
    """Malformed DSNs, wrong types and impossible durations are UsageErrors raised by the
    constructor, never a raw TypeError or an endless reconnect loop; no secret is quoted."""
    if kind is Database:
        kwargs = {**kwargs, "open": False}
    with pytest.raises(UsageError, match=match) as info:
        kind(*args, **kwargs)
    assert "secret" not in str(info.value)


def test_wrong_statement_types_fail_in_the_caller(make_db, pgsteady_database):
    """A query or params of the wrong type is a UsageError before anything is queued."""
    db = make_db(pgsteady_database.dsn, pool_size=1)
    accepted = db.stats().accepted
    for args in ((123,), ("select %s", "x"), ("select %s", 5)):
        with pytest.raises(UsageError, match=r"query must be|params must be"):
            db.fetchone(*args, deadline=5)
    assert db.stats().accepted == accepted
    assert db.fetchone("select %s::int", [7], deadline=5) == (7,)


def test_durations_accept_timedelta_and_inf_as_no_limit(pgsteady_database):
    """timedelta works everywhere; infinity as a server timeout means no limit (0)."""
    with Database(pgsteady_database.dsn, pool_size=1, statement_timeout=math.inf,
                  lock_timeout=timedelta(seconds=2), deadline=timedelta(seconds=10)) as db:
        assert db.fetchone("show statement_timeout") == ("0",)
        assert db.fetchone("show lock_timeout") == ("2s",)


def test_zero_deadline_fails_at_once_while_zero_statement_timeout_is_no_limit(
        make_db, pgsteady_database):
    """deadline=0 leaves no time: DeadlineExceeded and nothing runs; statement_timeout=0 is
    PostgreSQL's "no limit" (documented on Database)."""
    _table(pgsteady_database.dsn)
    db = make_db(pgsteady_database.dsn, pool_size=1, statement_timeout=0)
    db.wait(10)
    with pytest.raises(DeadlineExceeded):
        db.execute("insert into t values (1)", deadline=0)
    assert db.fetchone("show statement_timeout", deadline=5) == ("0",)
    _settle(db)
    assert _rows(pgsteady_database.dsn) == 0
    assert "deadline=0" in (Database.__doc__ or "")


@pytest.fixture(scope="module")
def small_server() -> Iterator[Postgres]:
    """A PostgreSQL with only 12 connection slots (9 for non-superusers)."""
    who = _process.run_as()
    server = Postgres(make_workdir(None, who), who=who, settings={"max_connections": 12})
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


@pytest.mark.parametrize("kind", [Database, AsyncDatabase])
def test_pool_taking_most_connection_slots_is_warned_about(caplog, kind, small_server):
    """A direct pool larger than half the server's connection slots logs one warning with
    the numbers; a small one logs nothing."""
    server = small_server
    for size, warned in ((7, True), (2, False)):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="pgsteady.runner"):
            if kind is Database:
                with Database(server.dsn(), pool_size=size) as db:
                    db.wait(10)
            else:
                async def use(size: int = size) -> None:
                    async with AsyncDatabase(server.dsn(), pool_size=size) as adb:
                        await adb.wait(10)
                asyncio.run(use())
        messages = [r.getMessage() for r in caplog.records if "pool_size=" in r.getMessage()]
        assert len(messages) == (1 if warned else 0), messages
        if warned:
            assert "pool_size=7" in messages[0] and "max_connections=12" in messages[0]


def test_transaction_pooler_refuses_vacuum_with_a_clear_error(make_db, pgsteady_stack,
                                                               pgsteady_database):
    """Behind a transaction pooler VACUUM and CREATE INDEX CONCURRENTLY raise UsageError
    saying to use a direct connection, with PostgreSQL's error as the cause."""
    _table(pgsteady_database.dsn)
    stack = pgsteady_stack(pool_size=2, pool_mode="transaction")
    db = make_db(stack.pooled_dsn(pgsteady_database.name), pool_size=1, pooler="transaction")
    for statement in ("vacuum t", "create index concurrently t_id on t (id)"):
        with pytest.raises(UsageError, match="pooler='direct'") as info:
            db.execute(statement, deadline=10)
        assert isinstance(info.value.__cause__, psycopg.errors.ActiveSqlTransaction)
    assert db.fetchone("select 1", deadline=10) == (1,)


@pytest.mark.parametrize("pooler", ["direct", "transaction"])
def test_unique_violation_keeps_postgres_detail(make_db, pgsteady_stack, pgsteady_database,
                                                pooler):
    """A duplicate key reaches the caller as psycopg's UniqueViolation with its DETAIL (the
    key), in every pooler mode; describe() keeps it on one line."""
    _table(pgsteady_database.dsn)
    dsn = pgsteady_database.dsn if pooler == "direct" else \
        pgsteady_stack(pool_size=2).pooled_dsn(pgsteady_database.name)
    db = make_db(dsn, pool_size=1, pooler=pooler)
    db.execute("insert into t values (1)", deadline=10)
    with pytest.raises(psycopg.errors.UniqueViolation) as info:
        db.execute("insert into t values (1)", deadline=10)
    assert info.value.diag.message_detail == "Key (id)=(1) already exists."
    line = describe(info.value)
    assert "\n" not in line and line.endswith("DETAIL: Key (id)=(1) already exists.")
