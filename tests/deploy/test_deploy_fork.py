"""Fork after the executor is made and used (gunicorn --preload, Celery prefork, uWSGI
without lazy-apps, multiprocessing): every child gets its own answers, no child fails, and
the parent's sessions survive its children (issue 37)."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine

from conftest import ASK, Bouncer
from pgsteady import AsyncDatabase, Database
from pgsteady.sqlalchemy import AsyncSteady, Steady, url_from_dsn

CHILDREN = 4
CALLS = 150  # per child: 4 x 150 one-statement calls (and `run` calls for Database)
MAX_ERRORS = 3  # a child stops asking after this many errors (each may take a deadline)
KINDS = ("database", "database-run", "async-database", "steady", "async-steady")


class Executor:
    """One executor kind, made and used in the parent; ``ask(ident)`` answers the text it
    was given back (from the database), in whatever process calls it."""

    def __init__(self, kind: str, dsn: str, pooler: str) -> None:
        self.kind = kind
        self.loop: asyncio.AbstractEventLoop | None = None
        if kind.startswith("async"):
            self.loop = asyncio.new_event_loop()
            self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
            self.thread.start()
        service = "forked"
        if kind.startswith("database"):
            self.db: Any = Database(dsn, pool_size=2, pooler=pooler, service=service)
        elif kind == "async-database":
            self.db = self._parent(_make_adb(dsn, pooler))
        else:
            url = url_from_dsn(dsn)
            args = {"connect_args": {"prepare_threshold": None}, "pool_size": 2,
                    "max_overflow": 0}
            if kind == "steady":
                self.engine: Any = create_engine(url, **args)
                self.db = Steady(self.engine, pooler=pooler, service=service)
            else:
                self.engine = create_async_engine(url, **args)
                self.db = AsyncSteady(self.engine, pooler=pooler, service=service)

    def _parent(self, coro: Any) -> Any:
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    async def aask(self, ident: str) -> str:
        if self.kind == "async-database":
            row = await self.db.fetchone(ASK, (ident,), deadline=5)
            return str(row[0])
        return str(await self.db.scalar(text("select cast(:v as text)"), {"v": ident},
                                        deadline=5))

    def ask(self, ident: str) -> str:
        """In the parent: through the parent's own loop for the async kinds."""
        if self.loop is not None:
            return str(self._parent(self.aask(ident)))
        return self.ask_sync(ident)

    def ask_sync(self, ident: str) -> str:
        if self.kind == "database":
            return str(self.db.fetchone(ASK, (ident,), deadline=5)[0])
        if self.kind == "database-run":
            def both(conn: psycopg.Connection[Any]) -> str:
                got = conn.execute(ASK, (ident,)).fetchone()
                again = conn.execute("select %s::text", (ident,)).fetchone()
                assert got is not None and again is not None
                return str(got[0]) if got[0] == again[0] else f"{got[0]}/{again[0]}"
            return str(self.db.run(both, deadline=5))
        return str(self.db.scalar(text("select cast(:v as text)"), {"v": ident}, deadline=5))

    def child(self, name: str, calls: int) -> dict[str, Any]:
        """What a forked child does: ``calls`` questions; counts wrong answers and errors.
        The async kinds run in the child's own event loop."""
        tally: dict[str, Any] = {"wrong": 0, "errors": 0, "first_error": None, "answers": 0}

        def count(ident: str, got: str | BaseException) -> None:
            if isinstance(got, BaseException):
                tally["errors"] += 1
                tally["first_error"] = tally["first_error"] or repr(got)[:300]
            else:
                tally["answers"] += 1
                tally["wrong"] += got != ident

        if self.loop is None:
            for i in range(calls):
                ident = f"{name}:{os.getpid()}:{i}"
                try:
                    count(ident, self.ask_sync(ident))
                except Exception as exc:
                    count(ident, exc)
                if tally["errors"] >= MAX_ERRORS:
                    break
            return tally

        async def many() -> None:
            for i in range(calls):
                ident = f"{name}:{os.getpid()}:{i}"
                try:
                    count(ident, await asyncio.wait_for(self.aask(ident), 15))
                except Exception as exc:
                    count(ident, exc)
                if tally["errors"] >= MAX_ERRORS:
                    break
        asyncio.run(many())
        return tally

    def close(self) -> None:
        if self.kind.startswith("database"):
            self.db.close()
        elif self.kind == "async-database":
            self._parent(self.db.close())
        elif self.kind == "steady":
            self.db.close()
            self.engine.dispose()
        else:
            self._parent(self.db.aclose())
            self._parent(self.engine.dispose())
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


async def _make_adb(dsn: str, pooler: str) -> AsyncDatabase:
    adb = AsyncDatabase(dsn, pool_size=2, pooler=pooler, service="forked")
    await adb.open()
    return adb


@pytest.fixture(params=["pgbouncer", "direct"])
def target(request: pytest.FixtureRequest, bouncer: Bouncer) -> tuple[str, str]:
    """(dsn, pooler): through PgBouncer in transaction mode, or straight to PostgreSQL (where
    the parent's sessions can be told apart by their backend pids)."""
    if request.param == "pgbouncer":
        return bouncer.dsn, "transaction"
    return bouncer.direct, "direct"


@pytest.fixture
def make_executor() -> Iterator[Callable[..., Executor]]:
    made: list[Executor] = []

    def make(*args: Any) -> Executor:
        made.append(Executor(*args))
        return made[-1]

    yield make
    for executor in made:
        executor.close()


def _parent_sessions(direct: str, pid: int) -> set[int]:
    """Backend pids of the sessions whose application_name names process ``pid``."""
    with psycopg.connect(direct, autocommit=True) as conn:
        rows = conn.execute("select pid from pg_stat_activity where application_name like %s",
                            (f"%:{pid}",)).fetchall()
    return {row[0] for row in rows}


def _warm(executor: Executor) -> None:
    """The parent uses it first, as a preloaded app does at import: connections are open."""
    for i in range(10):
        ident = f"parent-warm:{i}"
        assert executor.ask(ident) == ident


def _check_parent(executor: Executor, target: tuple[str, str], bouncer: Bouncer,
                  before: set[int]) -> None:
    for i in range(20):
        ident = f"parent-after:{i}"
        assert executor.ask(ident) == ident, "the parent got another process's answer"
    if target[1] == "direct" and before:
        # a child that closed an inherited connection would have ended one of these sessions
        assert before <= _parent_sessions(bouncer.direct, os.getpid())


def _fork_children(executor: Executor, calls: int) -> list[dict[str, Any]]:
    """``os.fork`` CHILDREN times; each child reports its tally on a pipe and ``_exit``s."""
    children: list[tuple[int, int]] = []
    for n in range(CHILDREN):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never return into pytest
            code = 0
            try:
                os.close(read)
                tally = executor.child(f"child{n}", calls)
                os.write(write, json.dumps(tally).encode())
            except BaseException:  # the child must _exit whatever happens
                code = 70
            finally:
                os._exit(code)
        os.close(write)
        children.append((pid, read))
    tallies: list[dict[str, Any]] = []
    deadline = time.monotonic() + 120
    for pid, read in children:
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                raise AssertionError(f"child {pid} did not finish within 120 s")
            time.sleep(0.05)
        with os.fdopen(read, "rb") as pipe:
            body = pipe.read()
        assert os.waitstatus_to_exitcode(done[1]) == 0, f"child {pid} failed"
        tallies.append(json.loads(body))
    return tallies


@pytest.mark.parametrize("kind", KINDS)
def test_os_fork_children_get_their_own_answers(kind, target, bouncer, make_executor):
    """4 forked children x 150 calls on an executor the parent made and used: 0 answers
    carrying another process's text, 0 errors in every child, the parent's sessions and
    answers intact."""
    executor = make_executor(kind, *target)
    _warm(executor)
    before = _parent_sessions(bouncer.direct, os.getpid()) if target[1] == "direct" else set()
    tallies = _fork_children(executor, CALLS)
    assert [t["answers"] for t in tallies] == [CALLS] * CHILDREN, tallies
    assert [t["wrong"] for t in tallies] == [0] * CHILDREN, tallies
    assert [t["errors"] for t in tallies] == [0] * CHILDREN, tallies
    _check_parent(executor, target, bouncer, before)


def _mp_child(executor: Executor, name: str, results: Any) -> None:
    results.put(executor.child(name, CALLS))


@pytest.mark.parametrize("kind", ["database", "async-database", "steady"])
def test_multiprocessing_fork_children_get_their_own_answers(kind, bouncer, make_executor):
    """multiprocessing with the fork start method, through PgBouncer in transaction mode:
    4 processes x 150 calls, 0 wrong answers and 0 errors; the parent still answers right."""
    executor = make_executor(kind, bouncer.dsn, "transaction")
    _warm(executor)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    procs = [context.Process(target=_mp_child, args=(executor, f"mp{n}", results))
             for n in range(CHILDREN)]
    for proc in procs:
        proc.start()
    tallies = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    assert [t["answers"] for t in tallies] == [CALLS] * CHILDREN, tallies
    assert [t["wrong"] for t in tallies] == [0] * CHILDREN, tallies
    assert [t["errors"] for t in tallies] == [0] * CHILDREN, tallies
    _check_parent(executor, (bouncer.dsn, "transaction"), bouncer, set())
