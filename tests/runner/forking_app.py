"""A service that makes its executor before forking, as gunicorn --preload, Celery's prefork
pool and multiprocessing do; run as a script by test_fork.py, it prints one JSON report.

The parent makes the executor, opens its connections and uses them; then ``children`` child
processes each make ``calls`` one-statement calls (and transactions) asking for their backend
pid and a marker of their own, and leave in the way asked (``exit``: ``sys.exit`` unwinding
the parent's ``with`` blocks, which closes the executor in the child; ``_exit``: ``os._exit``;
``mp``: multiprocessing with the fork start method; ``close``: close every inherited
connection explicitly, then ``sys.exit``). The parent then checks its own sessions.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

QUERY = "select pg_backend_pid(), %s::text"


def _sessions(dsn: str, label: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("select pid from pg_stat_activity where application_name = %s",
                            (label,)).fetchall()
    return sorted(row[0] for row in rows)


def _calls(call: Callable[[str, int], Any], calls: int) -> dict[str, Any]:
    """``calls`` calls, each checked against its own marker."""
    wrong, errors, pids, first_error = 0, 0, set(), ""
    for i in range(calls):
        marker = f"{os.getpid()}-{i}"
        try:
            row = call(marker, i)
        except Exception as exc:  # counted: the report says how many and the first one
            errors += 1
            first_error = first_error or f"{type(exc).__name__}: {exc}"
            continue
        if row is None or row[1] != marker:
            wrong += 1
        else:
            pids.add(row[0])
    return {"wrong": wrong, "errors": errors, "pids": sorted(pids), "first_error": first_error}


def _breaker() -> Any:
    from pgsteady.guards.breaker import CircuitBreaker

    return CircuitBreaker("forktest")


def _held_locks(app: Any) -> list[Any]:
    """The locks another thread of the parent might hold at the moment of the fork: the
    executor's own and its breaker's. A child that waited for them would wait forever."""
    db = app.db
    own = getattr(db, "_lock", None) or getattr(db, "_ready", None)
    return [lock for lock in (own, db.breaker._lock) if hasattr(lock, "acquire")]


class Sync:
    """Database (``fetchone`` or ``run``) or Steady, called from plain code."""

    def __init__(self, kind: str, dsn: str, pooler: str) -> None:
        self.kind = kind
        if kind in ("fetchone", "run"):
            from pgsteady.runner import Database

            self.db: Any = Database(dsn, pool_size=2, pooler=pooler, service="forktest",
                                    breaker=_breaker())
            self.db.wait(10)
            self.label = self.db.settings.application_name
            self.close: Callable[[], None] = self.db.close
        else:
            from sqlalchemy import create_engine

            from pgsteady.sqlalchemy import Steady, url_from_dsn

            self.engine = create_engine(url_from_dsn(dsn), pool_size=2, max_overflow=0)
            self.db = Steady(self.engine, pooler=pooler, service="forktest",
                             breaker=_breaker())
            self.label = self.db.settings.application_name
            self.close = self.db.close

    def call(self, marker: str, i: int) -> Any:
        if self.kind == "fetchone":
            return self.db.fetchone(QUERY, (marker,), deadline=10)
        if self.kind == "run":
            return self.db.run(lambda conn: conn.execute(QUERY, (marker,)).fetchone(),
                               deadline=10)
        from sqlalchemy import text

        statement = text("select pg_backend_pid(), cast(:m as text)")
        if i % 2:
            return self.db.execute(statement, {"m": marker}, deadline=10).one()
        return self.db.run(lambda session: session.execute(statement, {"m": marker}).one(),
                           deadline=10)

    def in_child(self, calls: int) -> dict[str, Any]:
        return _calls(self.call, calls)


class Async:
    """AsyncDatabase or AsyncSteady, used from the parent's loop; a child runs its own."""

    def __init__(self, kind: str, dsn: str, pooler: str) -> None:
        self.kind = kind
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._make(dsn, pooler))

    async def _make(self, dsn: str, pooler: str) -> None:
        if self.kind == "async":
            from pgsteady.arunner import AsyncDatabase

            self.db: Any = AsyncDatabase(dsn, pool_size=2, pooler=pooler, service="forktest",
                                         breaker=_breaker())
            await self.db.open()
            await self.db.wait(10)
        else:
            from sqlalchemy.ext.asyncio import create_async_engine

            from pgsteady.sqlalchemy import AsyncSteady, url_from_dsn

            self.engine = create_async_engine(url_from_dsn(dsn), pool_size=2, max_overflow=0)
            self.db = AsyncSteady(self.engine, pooler=pooler, service="forktest",
                                  breaker=_breaker())
        self.label = self.db.settings.application_name

    async def acall(self, marker: str, i: int) -> Any:
        if self.kind == "async":
            if i % 2:
                return await self.db.fetchone(QUERY, (marker,), deadline=10)

            async def work(conn: Any) -> Any:
                return await (await conn.execute(QUERY, (marker,))).fetchone()
            return await self.db.run(work, deadline=10)
        from sqlalchemy import text

        statement = text("select pg_backend_pid(), cast(:m as text)")
        if i % 2:
            return (await self.db.execute(statement, {"m": marker}, deadline=10)).one()

        async def session_work(session: Any) -> Any:
            return (await session.execute(statement, {"m": marker})).one()
        return await self.db.run(session_work, deadline=10)

    def call(self, marker: str, i: int) -> Any:
        return self.loop.run_until_complete(self.acall(marker, i))

    def close(self) -> None:
        self.loop.run_until_complete(self.db.close())

    def in_child(self, calls: int) -> dict[str, Any]:
        async def child() -> dict[str, Any]:
            wrong, errors, pids, first_error = 0, 0, set(), ""
            for i in range(calls):
                marker = f"{os.getpid()}-{i}"
                try:
                    row = await self.acall(marker, i)
                except Exception as exc:  # counted, as in _calls
                    errors += 1
                    first_error = first_error or f"{type(exc).__name__}: {exc}"
                    continue
                if row is None or row[1] != marker:
                    wrong += 1
                else:
                    pids.add(row[0])
            if self.kind == "async":
                await self.db.close()
            return {"wrong": wrong, "errors": errors, "pids": sorted(pids),
                    "first_error": first_error}
        return asyncio.run(child())  # the child's own loop


def _child(app: Any, calls: int, out: Path) -> None:
    out.write_text(json.dumps(app.in_child(calls)))


def _close_inherited() -> None:
    """Close, in the child, every connection it inherited: libpq sends Terminate on each."""
    from pgsteady import _fork

    for conn in list(_fork._INHERITED):
        if isinstance(conn, psycopg.Connection):
            conn.close()
        elif isinstance(conn, psycopg.AsyncConnection):
            asyncio.run(conn.close())


def _busy(app: Any, stop: threading.Event, tally: dict[str, Any]) -> None:
    while not stop.is_set():
        result = _calls(app.call, 1)
        tally["calls"] += 1
        tally["wrong"] += result["wrong"]
        tally["errors"] += result["errors"]
        tally["first_error"] = tally["first_error"] or result["first_error"]


def _wait_all(pids: list[int], timeout: float) -> list[int]:
    """Exit codes of forked children (bounded: a stuck child is killed and reported)."""
    codes: dict[int, int] = {}
    end = time.monotonic() + timeout
    while len(codes) < len(pids) and time.monotonic() < end:
        for pid in pids:
            if pid not in codes:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    codes[pid] = os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    for pid in pids:
        if pid not in codes:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            codes[pid] = -9
    return [codes[pid] for pid in pids]


def main(options: dict[str, Any]) -> dict[str, Any]:
    dsn, admin, kind = options["dsn"], options["admin_dsn"], options["kind"]
    children, calls, leave = options["children"], options["calls"], options["leave"]
    out = Path(options["out"])
    app: Any = (Sync if kind in ("fetchone", "run", "steady") else Async)(
        kind, dsn, options["pooler"])
    before = _calls(app.call, 6)  # the parent uses its connections first
    busy: dict[str, Any] = {"wrong": 0, "errors": 0, "calls": 0, "first_error": ""}
    stop = threading.Event()
    busy_thread = threading.Thread(target=_busy, args=(app, stop, busy))
    if options.get("busy_parent"):  # a thread of the parent keeps calling through the forks
        busy_thread.start()
    sessions_before = _sessions(admin, app.label)
    exit_codes: list[int] = []
    if leave == "mp":
        context = multiprocessing.get_context("fork")
        processes = [context.Process(target=_child, args=(app, calls, out / f"{n}.json"))
                     for n in range(children)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(120)
            exit_codes.append(process.exitcode if process.exitcode is not None else -1)
    else:
        pids = []
        held = _held_locks(app) if options.get("hold_locks") else []
        for lock in held:
            lock.acquire()
        for n in range(children):
            pid = os.fork()
            if pid == 0:
                try:
                    _child(app, calls, out / f"{n}.json")
                    if leave == "close":  # the worst a child can do: close what it inherited
                        _close_inherited()
                finally:
                    if leave == "_exit":
                        os._exit(0)
                if kind in ("fetchone", "run", "steady"):
                    app.close()  # a child's close must close only what it opened
                sys.exit(0)  # the interpreter's exit: finalisers, atexit
            pids.append(pid)
        for lock in held:
            lock.release()
        exit_codes = _wait_all(pids, 60)
    stop.set()
    if busy_thread.is_alive():
        busy_thread.join(60)
    time.sleep(0.3)  # the ended children's sessions leave pg_stat_activity
    after = _calls(app.call, 20)  # the parent's sessions still serve it
    report = {
        "exit_codes": exit_codes,
        "children": [json.loads((out / f"{n}.json").read_text())
                     if (out / f"{n}.json").exists() else None for n in range(children)],
        "before": before, "after": after, "sessions_before": sessions_before,
        "sessions_after": _sessions(admin, app.label), "busy": busy,
    }
    app.close()
    return report


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
