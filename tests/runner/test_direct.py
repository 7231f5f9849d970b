"""A one-statement call on its caller's thread (``pgsteady._direct``): the deadline still ends
only the caller's wait; the worker finishes what the caller left, on the same connection."""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

import psycopg
import pytest

from pgsteady import _core, _direct
from pgsteady.errors import DeadlineExceeded
from pgsteady.runner import Database


class RecordingCursor(psycopg.Cursor[Any]):
    def execute(self, *args: Any, **kwargs: Any) -> Any:
        Recording.threads.append(threading.current_thread().name)
        return super().execute(*args, **kwargs)


class Recording(psycopg.Connection[Any]):
    """A user's own connection class (its cursors say on which thread each statement ran):
    the Database mixes the driven wait into it."""

    threads: ClassVar[list[str]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cursor_factory = RecordingCursor


def _table(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table if not exists direct_done (n int)")
        conn.execute("truncate direct_done")


def _rows(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select count(*) from direct_done").fetchone()
    assert row is not None
    return int(row[0])


def _settle(db: Database, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while db.stats().in_flight and time.monotonic() < end:
        time.sleep(0.02)


def test_the_installed_psycopg_lets_callers_run_their_own_statement():
    """Fails loudly if a psycopg upgrade removes what the fast path leans on (every call
    would still be safe, through the hand-off, but slower)."""
    assert _direct.ENABLED, f"psycopg {psycopg.__version__}: Connection.wait has no timeout"


def test_an_idle_database_runs_the_statement_on_the_callers_thread(pgsteady_database):
    Recording.threads.clear()
    with Database(pgsteady_database.dsn, pool_size=1,
                  pool_kwargs={"connection_class": Recording}) as db:
        db.wait(10)
        db.fetchone("select 1")  # the worker picks the connection up from the pool
        Recording.threads.clear()
        assert db.fetchone("select 2", deadline=5) == (2,)
        assert db.fetchall("select generate_series(1, 3)", deadline=5) == [(1,), (2,), (3,)]
        assert Recording.threads == [threading.current_thread().name] * 2
        stats = db.stats()
    assert (stats.accepted, stats.answered, stats.running) == (3, 3, 0)


@pytest.mark.parametrize("direct", [True, False], ids=["caller-runs", "hand-off"])
def test_a_deadline_mid_statement_leaves_it_to_finish_on_its_connection(
        pgsteady_database, direct):
    dsn = pgsteady_database.dsn
    _table(dsn)
    with Database(dsn, pool_size=1) as db:
        db._direct = direct
        db.wait(10)
        pid = db.fetchone("select pg_backend_pid()")
        start = time.monotonic()
        with pytest.raises(DeadlineExceeded) as info:
            db.execute("insert into direct_done select 1 from pg_sleep(0.6)", deadline=0.1)
        waited = time.monotonic() - start
        assert info.value.phase == "running"
        assert waited < 0.5  # at its deadline, not after the 0.6 s statement
        assert _rows(dsn) == 0  # still running: nothing cancelled it, nothing committed yet
        _settle(db)
        assert _rows(dsn) == 1  # it finished and committed without its caller
        assert db.fetchone("select pg_backend_pid()", deadline=5) == pid  # same connection
        stats = db.stats()
    assert stats.deadline_exceeded_running == 1
    assert stats.abandoned_completions == 1
    assert stats.failed == 0


def test_a_statement_error_on_the_callers_thread_is_the_callers(pgsteady_database):
    with Database(pgsteady_database.dsn, pool_size=1) as db:
        db.wait(10)
        pid = db.fetchone("select pg_backend_pid()")
        with pytest.raises(psycopg.errors.DivisionByZero):
            db.fetchone("select 1 / 0", deadline=5)
        assert db.fetchone("select pg_backend_pid()", deadline=5) == pid
        stats = db.stats()
    assert (stats.failed, stats.answered) == (1, 2)


def test_a_connection_lost_under_the_caller_is_replaced(pgsteady_database):
    dsn = pgsteady_database.dsn
    with Database(dsn, pool_size=1) as db:
        db.wait(10)
        pid = db.fetchone("select pg_backend_pid()")[0]
        with psycopg.connect(dsn, autocommit=True) as killer:
            killer.execute("select pg_terminate_backend(%s)", (pid,))
        time.sleep(0.2)
        with pytest.raises(Exception) as info:
            db.fetchone("select 1", deadline=5)
        assert "connection" in str(info.value).lower()
        new_pid = db.fetchone("select pg_backend_pid()", deadline=10)[0]
    assert new_pid != pid


def test_a_queued_job_is_not_overtaken_and_calls_share_the_pool(pgsteady_database):
    """Many threads at once on a small pool: each call either borrows an idle connection or
    queues; all are answered, and never more statements run than the pool has connections."""
    dsn = pgsteady_database.dsn
    with Database(dsn, pool_size=2, max_waiting=64) as db:
        db.wait(10)
        peak = 0
        errors: list[BaseException] = []

        def caller() -> None:
            nonlocal peak
            for _ in range(40):
                try:
                    db.fetchone("select pg_sleep(0.002)", deadline=10)
                except BaseException as exc:  # collected for the assertion
                    errors.append(exc)
                peak = max(peak, db.stats().running)

        threads = [threading.Thread(target=caller) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        stats = db.stats()
    assert errors == []
    assert stats.answered == 240 and stats.in_flight == 0
    assert peak <= 2


def test_a_connection_returned_as_its_worker_wakes_is_listed_idle_once(
        pgsteady_database, monkeypatch):
    """The worker's hold timer fires while a caller has its connection, and the caller gives
    it back between the worker's two looks (found in review): the slot must not be listed
    idle twice, or one connection goes to two users, or a slot without one is lent."""
    monkeypatch.setattr(_core, "HOLD_IDLE", 0.05)
    db = Database(pgsteady_database.dsn, pool_size=1)
    try:
        db.wait(10)
        db.fetchone("select 1")
        park = db._park

        def slow_park(slot: Any) -> None:
            park(slot)
            if slot.lent:  # the hold timer fired while a caller had the connection
                time.sleep(0.3)  # the worker loses the CPU between its two locks

        db._park = slow_park  # type: ignore[method-assign]
        assert db.fetchone("select pg_sleep(0.2)::text", deadline=5) == ("",)
        db._park = park  # type: ignore[method-assign]
        time.sleep(0.5)  # the worker gives its connection back after HOLD_IDLE
        assert db.fetchone("select 1", deadline=2) == (1,)
        assert db.stats().in_flight == 0
    finally:
        db.close(timeout=1)


def test_a_deadline_passed_before_the_borrow_sends_nothing(pgsteady_database):
    dsn = pgsteady_database.dsn
    _table(dsn)
    with Database(dsn, pool_size=1) as db:
        db.wait(10)
        db.fetchone("select 1")
        assert db._idle_holding  # the next call could borrow the connection
        with pytest.raises(DeadlineExceeded) as info:
            db.execute("insert into direct_done values (1)", deadline=1e-7)
        assert info.value.phase == "queued"  # safe to retry: nothing was sent
        _settle(db)
        assert _rows(dsn) == 0


@pytest.mark.parametrize("direct", [True, False], ids=["caller-runs", "hand-off"])
def test_a_parameter_that_cannot_be_sent_is_the_calls_failure(pgsteady_database, direct):
    with Database(pgsteady_database.dsn, pool_size=1) as db:
        db._direct = direct
        db.wait(10)
        db.fetchone("select 1")
        with pytest.raises(UnicodeEncodeError):
            db.fetchone("select %s::text", ("\udc80",), deadline=5)
        assert db.fetchone("select 2", deadline=5) == (2,)
        stats = db.stats()
    assert (stats.failed, stats.deadline_exceeded_running, stats.abandoned_completions) \
        == (1, 0, 0)
