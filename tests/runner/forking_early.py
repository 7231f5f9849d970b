"""A service that forks a few milliseconds after its Database started connecting, as gunicorn
``--preload`` does right after importing the app; run as a script by test_fork_connecting.py.

argv: the DSN, the delay before the fork (seconds), and "sync", "async" (a Database and an
AsyncDatabase connecting in the parent) or "steady" (a Steady warming its engine up in a
thread, as an app's start-up hook does). The parent forks once
and waits up to 20 s for its child, whose first call must be answered; exit 0 if it was, 1 if
the child failed, 2 if it hung (then it is killed)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

from pgsteady import AsyncDatabase, Database

dsn, delay, kind = sys.argv[1], float(sys.argv[2]), sys.argv[3]


def child_sync(db: Database) -> None:
    assert db.fetchone("select 1", deadline=15) == (1,)


async def child_async() -> None:
    async with AsyncDatabase(dsn, pool_size=4, pooler="transaction") as adb:
        assert await adb.fetchone("select 1", deadline=15) == (1,)


def steady_in_background() -> object:
    import threading

    from sqlalchemy import create_engine

    from pgsteady.sqlalchemy import Steady, url_from_dsn

    steady = Steady(create_engine(url_from_dsn(dsn), pool_size=4, max_overflow=0),
                    pooler="transaction")
    threading.Thread(target=steady.warm_up, daemon=True).start()
    return steady


def child_steady(steady: object) -> None:
    from sqlalchemy import text

    assert steady.scalar(text("select 1"), deadline=15) == 1  # type: ignore[attr-defined]


def main() -> int:
    if kind == "steady":
        return fork_and_wait(steady_in_background())
    db = Database(dsn, pool_size=4, pooler="transaction")  # its pool starts connecting now
    # An AsyncDatabase connects on its own loop's thread; the child makes its own.
    loop_db = None
    if kind == "async":
        import threading

        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True).start()
        loop_db = AsyncDatabase(dsn, pool_size=4, pooler="transaction")
        asyncio.run_coroutine_threadsafe(loop_db.open(), loop).result(10)
    return fork_and_wait(db)


def fork_and_wait(made: object) -> int:
    time.sleep(delay)
    pid = os.fork()
    if pid == 0:
        try:
            if kind == "async":
                asyncio.run(child_async())
            elif kind == "steady":
                child_steady(made)
            else:
                child_sync(made)  # type: ignore[arg-type]
        except BaseException as exc:  # reported by the exit code
            print(f"child failed: {exc!r}", file=sys.stderr)
            os._exit(1)
        os._exit(0)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return 0 if os.waitstatus_to_exitcode(status) == 0 else 1
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return 2


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # the parent's pools are not worth a clean close here
