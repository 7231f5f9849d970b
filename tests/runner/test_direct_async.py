"""AsyncDatabase's one-statement call on its caller's task (``pgsteady._direct``): the
deadline, or a cancel, still ends only the caller's wait; the worker finishes what the caller
left, on the same connection, and PgBouncer closes nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import psycopg
import pytest

from pgsteady import _direct
from pgsteady.arunner import AsyncDatabase
from pgsteady.errors import DeadlineExceeded


class RecordingCursor(psycopg.AsyncCursor[Any]):
    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        task = asyncio.current_task()
        Recording.tasks.append(task.get_name() if task else "")
        return await super().execute(*args, **kwargs)


class Recording(psycopg.AsyncConnection[Any]):
    """A user's own connection class (its cursors say on which task each statement ran):
    the AsyncDatabase mixes the driven wait into it."""

    tasks: ClassVar[list[str]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cursor_factory = RecordingCursor


def _table(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table if not exists adirect_done (n int)")
        conn.execute("truncate adirect_done")


def _rows(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select count(*) from adirect_done").fetchone()
    assert row is not None
    return int(row[0])


async def _settle(db: AsyncDatabase, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while db.stats().in_flight and time.monotonic() < end:
        await asyncio.sleep(0.02)


def _with_db(dsn: str, body: Callable[[AsyncDatabase], Awaitable[Any]],
             **kwargs: Any) -> Any:
    """``body(db)`` on an open AsyncDatabase whose worker already holds a connection (so the
    next one-statement call can borrow it); returns what ``body`` returned."""
    async def scenario() -> Any:
        db = AsyncDatabase(dsn, **{"pool_size": 1, **kwargs})
        await db.open()
        try:
            await db.wait(10)
            await db.fetchone("select 1", deadline=10)  # the worker picks a connection up
            return await body(db)
        finally:
            await db.close()
    return asyncio.run(scenario())


def test_an_idle_async_database_runs_the_statement_on_the_callers_task(pgsteady_database):
    async def body(db: AsyncDatabase) -> Any:
        Recording.tasks.clear()
        caller = asyncio.current_task()
        assert caller is not None
        caller.set_name("the-caller")
        assert await db.fetchone("select 2", deadline=5) == (2,)
        assert await db.fetchall("select generate_series(1, 3)", deadline=5) == \
            [(1,), (2,), (3,)]
        assert await db.execute("select 1", deadline=5) == 1
        return list(Recording.tasks), db.stats()

    tasks, stats = _with_db(pgsteady_database.dsn, body,
                            pool_kwargs={"connection_class": Recording})
    assert tasks == ["the-caller"] * 3  # never a worker's task
    assert (stats.accepted, stats.answered, stats.running, stats.failed) == (4, 4, 0, 0)


@pytest.mark.parametrize("direct", [True, False], ids=["caller-runs", "hand-off"])
def test_an_async_deadline_mid_statement_leaves_it_to_finish_on_its_connection(
        pgsteady_database, direct):
    dsn = pgsteady_database.dsn
    _table(dsn)

    async def body(db: AsyncDatabase) -> Any:
        db._direct = direct
        pid = await db.fetchone("select pg_backend_pid()", deadline=5)
        start = time.monotonic()
        with pytest.raises(DeadlineExceeded) as info:
            await db.execute("insert into adirect_done select 1 from pg_sleep(0.6)",
                             deadline=0.1)
        waited = time.monotonic() - start
        assert info.value.phase == "running"
        assert waited < 0.5  # at its deadline, not after the 0.6 s statement
        assert _rows(dsn) == 0  # still running: nothing cancelled it, nothing committed yet
        await _settle(db)
        assert _rows(dsn) == 1  # it finished and committed without its caller
        assert await db.fetchone("select pg_backend_pid()", deadline=5) == pid  # same one
        return db.stats()

    stats = _with_db(dsn, body)
    assert stats.deadline_exceeded_running == 1
    assert stats.abandoned_completions == 1
    assert stats.failed == 0


def test_an_async_caller_cancelled_on_its_own_task_leaves_the_write_to_finish(
        pgsteady_stack, pgsteady_database):
    """Through PgBouncer in transaction mode: a caller running its statement on its own task
    is cancelled (an ``asyncio.timeout``, a client gone) mid-statement. The statement is not
    cancelled on the server: the worker finishes it, the write commits, the next 20 calls
    succeed on the same server session, and PgBouncer destroys no server connection."""
    cluster = pgsteady_stack(pool_size=2)
    _table(pgsteady_database.dsn)
    reader = cluster.pgbouncer.log_reader()
    Recording.tasks.clear()

    async def body(db: AsyncDatabase) -> Any:
        pid = await db.fetchone("select pg_backend_pid()", deadline=5)
        drive = db._drive

        async def recorded(slot: Any, job: Any) -> Any:
            task = asyncio.current_task()
            Recording.tasks.append(task.get_name() if task else "")
            return await drive(slot, job)

        db._drive = recorded  # type: ignore[method-assign]
        caller = asyncio.current_task()
        assert caller is not None
        caller.set_name("the-caller")
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await db.execute("insert into adirect_done select 1 from pg_sleep(0.6)",
                                 deadline=10)
        left = time.monotonic() - start
        db._drive = drive  # type: ignore[method-assign]
        answers = [await db.fetchone("select %s::int", (i,), deadline=10) for i in range(20)]
        await _settle(db)
        return left, answers, pid, await db.fetchone("select pg_backend_pid()", deadline=5), \
            db.stats()

    left, answers, pid, pid_after, stats = _with_db(
        cluster.pooled_dsn(pgsteady_database.name), body, pooler="transaction")
    assert Recording.tasks == ["the-caller"]  # the insert ran on the caller's own task
    assert left < 0.5  # at the cancel, not when the 0.6 s statement ended
    assert answers == [(i,) for i in range(20)]
    assert _rows(pgsteady_database.dsn) == 1  # committed: it was never cancelled
    assert pid_after == pid
    assert (stats.interrupted, stats.abandoned_completions, stats.failed) == (1, 1, 0)
    time.sleep(0.3)
    assert reader.counts().total["not_ready"] == 0


def test_an_async_statement_error_on_the_callers_task_is_the_callers(pgsteady_database):
    async def body(db: AsyncDatabase) -> Any:
        pid = await db.fetchone("select pg_backend_pid()", deadline=5)
        with pytest.raises(psycopg.errors.DivisionByZero):
            await db.fetchone("select 1 / 0", deadline=5)
        with pytest.raises(UnicodeEncodeError):  # a parameter that cannot be sent
            await db.fetchone("select %s::text", ("\udc80",), deadline=5)
        assert await db.fetchone("select pg_backend_pid()", deadline=5) == pid
        return db.stats()

    stats = _with_db(pgsteady_database.dsn, body)
    assert (stats.failed, stats.answered, stats.abandoned_completions) == (2, 3, 0)


def test_an_async_connection_lost_under_the_caller_is_replaced(pgsteady_database):
    dsn = pgsteady_database.dsn

    async def body(db: AsyncDatabase) -> Any:
        pid = (await db.fetchone("select pg_backend_pid()", deadline=5))[0]
        with psycopg.connect(dsn, autocommit=True) as killer:
            killer.execute("select pg_terminate_backend(%s)", (pid,))
        await asyncio.sleep(0.2)
        with pytest.raises(Exception) as info:
            await db.fetchone("select 1", deadline=5)
        assert "connection" in str(info.value).lower()
        return pid, (await db.fetchone("select pg_backend_pid()", deadline=10))[0]

    pid, new_pid = _with_db(dsn, body)
    assert new_pid != pid


def test_async_callers_share_the_pool_and_never_overtake_a_queued_job(pgsteady_database):
    """Many tasks at once on a pool of 2: each call borrows an idle connection or queues; all
    are answered, and never more statements run than the pool has connections."""
    async def body(db: AsyncDatabase) -> Any:
        peak = 0

        async def caller() -> None:
            nonlocal peak
            for _ in range(40):
                await db.fetchone("select pg_sleep(0.002)", deadline=10)
                peak = max(peak, db.stats().running)

        await asyncio.gather(*(caller() for _ in range(6)))
        return peak, db.stats()

    peak, stats = _with_db(pgsteady_database.dsn, body, pool_size=2, max_waiting=64)
    assert stats.answered == 241 and stats.in_flight == 0 and stats.failed == 0
    assert peak <= 2


def test_an_async_deadline_passed_before_the_borrow_sends_nothing(pgsteady_database):
    dsn = pgsteady_database.dsn
    _table(dsn)

    async def body(db: AsyncDatabase) -> Any:
        assert db._idle_holding  # the next call could borrow the connection
        with pytest.raises(DeadlineExceeded) as info:
            await db.execute("insert into adirect_done values (1)", deadline=1e-7)
        assert info.value.phase == "queued"  # safe to retry: nothing was sent
        await _settle(db)
        return _rows(dsn)

    assert _with_db(dsn, body) == 0


def test_the_installed_psycopg_lets_async_callers_run_their_own_statement():
    assert _direct.ENABLED
    assert _direct.adriven(psycopg.AsyncConnection) is _direct.DrivenAsyncConnection
    assert issubclass(_direct.adriven(Recording), Recording)
