"""Guards' backends after os.fork (gunicorn --preload, Celery prefork): a child works with
state of its own — its own Redis connections (sync and asyncio, in its own event loop), its
own breaker window, locks nobody holds — and the parent's connections keep working (issue 37)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from pgsteady.errors import CacheUnavailable
from pgsteady.guards.backends import MemoryBackend, RedisBackend


def in_child(work: Callable[[], dict[str, Any]], timeout: float = 30) -> dict[str, Any]:
    """Fork; run ``work`` in the child and return what it reported (killed if it hangs)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read)
            os.write(write, json.dumps(work()).encode())
        except BaseException as exc:  # the child must _exit whatever happens
            os.write(write, json.dumps({"crashed": repr(exc)}).encode())
        finally:
            os._exit(code)
    os.close(write)
    deadline = time.monotonic() + timeout
    while os.waitpid(pid, os.WNOHANG)[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(read)
            return {"hung": True}
        time.sleep(0.02)
    with os.fdopen(read, "rb") as pipe:
        body = pipe.read()
    return json.loads(body) if body else {"crashed": "no report"}


def test_redis_backend_child_uses_its_own_connections(pgsteady_redis):
    """A RedisBackend used by the parent (sync, and asyncio on the parent's loop) and then
    forked: the child's 200 sync and 200 asyncio round trips (in its own loop) all get their
    own values back, and the parent's clients still work afterwards."""
    backend = RedisBackend(pgsteady_redis.url, timeout=2)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def parent_async(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(10)

    try:
        backend.set("p", b"parent", 60)
        parent_async(backend.aset("pa", b"parent-async", 60))
        assert parent_async(backend.aget("pa"))[0] == b"parent-async"

        def child() -> dict[str, Any]:
            tally = {"wrong": 0, "errors": 0, "first_error": None}

            def check(got: Any, want: bytes) -> None:
                tally["wrong"] += got is None or got[0] != want

            for i in range(200):
                try:
                    want = f"{os.getpid()}:{i}".encode()
                    backend.set(f"c{i}", want, 60)
                    check(backend.get(f"c{i}"), want)
                except Exception as exc:
                    tally["errors"] += 1
                    tally["first_error"] = tally["first_error"] or repr(exc)[:200]

            async def many() -> None:
                for i in range(200):
                    try:
                        want = f"{os.getpid()}:a{i}".encode()
                        await backend.aset(f"a{i}", want, 60)
                        check(await backend.aget(f"a{i}"), want)
                    except Exception as exc:
                        tally["errors"] += 1
                        tally["first_error"] = tally["first_error"] or repr(exc)[:200]
                await backend.aclose()
            asyncio.run(many())
            backend.close()
            return tally

        report = in_child(child)
        assert report == {"wrong": 0, "errors": 0, "first_error": None}
        assert backend.get("p")[0] == b"parent"
        assert parent_async(backend.aget("pa"))[0] == b"parent-async"
    finally:
        parent_async(backend.aclose())
        backend.close()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_redis_backend_child_has_its_own_breaker_window(pgsteady_redis):
    """A parent whose breaker opened on a Redis outage forks once Redis is back: the child
    asks Redis at once (its own window) while the parent still fails fast."""
    backend = RedisBackend(pgsteady_redis.url, timeout=0.5)
    try:
        pgsteady_redis.stop()
        with pytest.raises(CacheUnavailable):
            backend.get("k")
        pgsteady_redis.restart()
        with pytest.raises(CacheUnavailable):  # the parent's breaker is still open
            backend.get("k")

        def child() -> dict[str, Any]:
            try:
                backend.set("k", b"child", 60)
                got = backend.get("k")
                return {"got": None if got is None else got[0].decode()}
            except Exception as exc:
                return {"error": repr(exc)[:200]}

        assert in_child(child) == {"got": "child"}
    finally:
        backend.close()


def test_memory_backend_lock_held_at_fork_does_not_hang_the_child():
    """A MemoryBackend whose lock a parent thread holds at the fork: the child's calls still
    answer (a fresh lock), keep the cached entries, and start without the parent's leases."""
    backend = MemoryBackend()
    backend.set("k", "v", 60)
    assert backend.acquire("slot", "parent", 1, 60) is None
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with backend._lock:  # a parent thread in the middle of a call when the fork happens
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    try:
        def child() -> dict[str, Any]:
            return {"got": backend.get("k")[0],
                    "slot": backend.acquire("slot", "child", 1, 60) is None}

        assert in_child(child, timeout=10) == {"got": "v", "slot": True}
    finally:
        release.set()
        thread.join(5)
