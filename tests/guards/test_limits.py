"""KeyedLimiter across processes on a real Redis, and in memory."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pgsteady.errors import CacheUnavailable, LimitExceeded, UsageError
from pgsteady.guards import (
    AsyncKeyedLimiter,
    CircuitBreaker,
    KeyedLimiter,
    MemoryBackend,
    RedisBackend,
)

WORKER = Path(__file__).with_name("_limiter_worker.py")


def _worker(redis_url: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PGSTEADY_TEST_REDIS_URL": redis_url}
    return subprocess.Popen([sys.executable, str(WORKER), *args], env=env, text=True,
                            stdout=subprocess.PIPE)


def test_three_processes_never_exceed_the_limit(pgsteady_redis):
    """3 processes x 20 threads on one key with limit 2: at most 2 holders at once, measured
    by a Redis counter each holder bumps inside its slot."""
    procs = [_worker(pgsteady_redis.url, "crowd", "20", "2") for _ in range(3)]
    try:
        results = [json.loads(proc.communicate(timeout=60)[0]) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert all(proc.returncode == 0 for proc in procs)
    assert max(r["max_inside"] for r in results) == 2
    assert sum(r["holds"] for r in results) >= 50  # it really ran concurrently for a while
    with pgsteady_redis.client() as client:
        assert int(client.get("inside:org:42")) == 0
        assert client.zcard("pgsteady:slots:org:42") == 0  # every slot released


def test_a_killed_holder_frees_its_slot_within_its_lease(pgsteady_redis):
    """SIGKILL the process holding the only slot: it is free again when its lease ends."""
    lease = 1.0
    proc = _worker(pgsteady_redis.url, "hold", str(lease))
    try:
        assert proc.stdout.readline().strip() == "held"
        limiter = KeyedLimiter(1, backend=RedisBackend(pgsteady_redis.url), lease=5)
        with pytest.raises(LimitExceeded) as info, limiter.hold("org:7", wait=0.05):
            pass
        assert info.value.limit == 1 and 0 < info.value.retry_after <= lease
        time.sleep(lease * 1.5)  # renewals keep it held past its first lease
        with pytest.raises(LimitExceeded), limiter.hold("org:7", wait=0.05):
            pass
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        killed = time.monotonic()
        with limiter.hold("org:7", wait=lease + 1):
            freed_after = time.monotonic() - killed
    finally:
        proc.kill()
        proc.wait(10)
    assert freed_after <= lease + 0.3


def test_memory_limiter_waits_for_a_slot_and_refuses_when_none_frees():
    """In memory: a second holder waits for the first to leave; a third is refused after its
    wait with LimitExceeded naming the key and limit."""
    limiter = KeyedLimiter(1, backend=MemoryBackend(), lease=5)
    inside = threading.Event()
    leave = threading.Event()

    def first() -> None:
        with limiter.hold("k"):
            inside.set()
            leave.wait(5)

    thread = threading.Thread(target=first)
    thread.start()
    inside.wait(5)
    start = time.monotonic()
    with pytest.raises(LimitExceeded) as info, limiter.hold("k", wait=0.1):
        pass
    assert 0.09 <= time.monotonic() - start < 0.5
    assert (info.value.key, info.value.limit) == ("k", 1)
    threading.Timer(0.1, leave.set).start()
    with limiter.hold("k", wait=2):
        pass
    thread.join(5)
    with limiter.hold("other-key", wait=0):
        pass


def test_async_limiter_on_redis(pgsteady_redis):
    """AsyncKeyedLimiter: 10 tasks, limit 3, never more than 3 inside."""
    async def main() -> int:
        limiter = AsyncKeyedLimiter(3, backend=RedisBackend(pgsteady_redis.url), lease=5)
        inside = peak = 0

        async def task() -> None:
            nonlocal inside, peak
            async with limiter.hold("k", wait=5):
                inside += 1
                peak = max(peak, inside)
                await asyncio.sleep(0.02)
                inside -= 1

        await asyncio.gather(*(task() for _ in range(10)))
        return peak

    assert asyncio.run(main()) == 3


def test_bad_limits_are_usage_errors():
    """max_per_key 0 or no lease is refused with a UsageError."""
    with pytest.raises(UsageError):
        KeyedLimiter(0)
    with pytest.raises(UsageError):
        KeyedLimiter(1, lease=0)


def test_retry_after_follows_how_long_holds_last():
    """After holds of ~20 ms, a refusal suggests retrying in about that, not the 30 s lease."""
    limiter = KeyedLimiter(1, lease=30)
    for _ in range(5):
        with limiter.hold("k"):
            time.sleep(0.02)
    with limiter.hold("k"), pytest.raises(LimitExceeded) as info, limiter.hold("k", wait=0):
        pass
    assert 0.01 <= info.value.retry_after < 0.2


def _limiter(url: str, policy: str) -> KeyedLimiter:
    breaker = CircuitBreaker(f"redis-{policy}", consecutive_failures=1, open_for=30)
    backend = RedisBackend(url, timeout=0.25, breaker=breaker)
    if policy == "raise":  # the default
        return KeyedLimiter(1, backend=backend)
    return KeyedLimiter(1, backend=backend, on_backend_error=policy)


def test_limiter_with_redis_stopped_raises_opens_or_closes(pgsteady_redis):
    """Redis stopped: on_backend_error="raise" (the default) raises CacheUnavailable, "open"
    runs the block without a slot, "closed" raises LimitExceeded caused by the outage."""
    limiters = {policy: _limiter(pgsteady_redis.url, policy)
                for policy in ("raise", "open", "closed")}
    pgsteady_redis.stop()
    ran = []
    for _ in range(2):  # the failure itself, then the open breaker: the same outcome
        with pytest.raises(CacheUnavailable), limiters["raise"].hold("org:1"):
            ran.append("raise")
        with limiters["open"].hold("org:1"):
            ran.append("open")
        with pytest.raises(LimitExceeded) as info, limiters["closed"].hold("org:1"):
            ran.append("closed")
        assert isinstance(info.value.__cause__, CacheUnavailable)
        assert info.value.retry_after > 1  # when the backend will be asked again
    assert ran == ["open", "open"]
    with pytest.raises(UsageError, match="on_backend_error"):
        KeyedLimiter(1, on_backend_error="ignore")


def test_limiter_with_redis_hung_fails_open_after_one_timeout(pgsteady_redis):
    """Redis SIGSTOPped: with on_backend_error="open" the first hold waits for one timeout
    and every later hold (sync and async) runs at once without touching Redis; "closed"
    refuses at once."""
    sync = _limiter(pgsteady_redis.url, "open")
    backend = sync.backend
    with pgsteady_redis.hung():
        start = time.monotonic()
        with sync.hold("org:1"):
            pass
        assert time.monotonic() - start >= 0.25  # it asked Redis once, and waited
        calls = backend.breaker.stats().calls
        start = time.monotonic()
        for _ in range(50):
            with sync.hold("org:1"):
                pass

        async def main() -> int:
            limiter = AsyncKeyedLimiter(1, backend=backend, on_backend_error="open")
            inside = 0
            for _ in range(50):
                async with limiter.hold("org:1"):
                    inside += 1
            return inside

        assert asyncio.run(main()) == 50
        assert time.monotonic() - start < 0.5  # 100 holds; main: 0.25 s each, 25 s
        assert backend.breaker.stats().calls == calls
        closed = KeyedLimiter(1, backend=backend, on_backend_error="closed")
        with pytest.raises(LimitExceeded), closed.hold("org:1"):
            pass
