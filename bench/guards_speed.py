"""What the guards cost on the hot path, against a peer measured in the same run.

- a memory-cache hit (``StaleCache.get_or_load`` on a fresh key) in µs, next to a plain
  ``dict.get`` and ``functools.lru_cache`` (goal: under 5 µs);
- a Redis-cache hit (``StaleCache`` over ``RedisBackend``) against a bare redis-py ``GET`` of
  the same value on the same server, rounds interleaved (goal: under 1.3x);
- ``with breaker:`` on a closed breaker, and a ``KeyedLimiter.hold`` on Redis (two round
  trips: a script and a ZREM) against the same bare GET;
- lookups while Redis hangs (SIGSTOP; ``RedisBackend``'s default 0.25 s timeout): the first,
  then p50 / p99 of the next ``--hung-lookups``, sync and async. Before the backend had a
  breaker each one waited for a GET and a SET timeout (0.5 s); the hang needs no pgsteady
  API, so the same script measures an older checkout (``PYTHONPATH=<old>/src``).

The Redis is the lab's (``RedisServer``: loopback TCP, password). On a shared 2-core machine
the absolute figures are pessimistic; the ratios are what to read.

    .venv/bin/python bench/guards_speed.py [--rounds 21] [--calls 600] [--hung-lookups 100]
        [--only memory,redis,hung]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from pgsteady.guards import (
    AsyncStaleCache,
    CircuitBreaker,
    KeyedLimiter,
    RedisBackend,
    StaleCache,
)
from pgsteady.lab import _process
from pgsteady.lab.cluster import make_workdir
from pgsteady.lab.redis_server import RedisServer

VALUE = {"org": 42, "plan": "pro", "limits": {"rpm": 600, "tpm": 90_000}, "keys": 3}


def per_call(fn: Callable[[], Any], calls: int) -> float:
    """Mean seconds per call over ``calls`` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def best_of(rounds: int, fn: Callable[[], Any], calls: int) -> tuple[float, float]:
    """(median, best) of ``rounds`` per-call means."""
    means = [per_call(fn, calls) for _ in range(rounds)]
    return statistics.median(means), min(means)


def memory(rounds: int) -> None:
    calls = 200_000
    cache = StaleCache(fresh_for=3600, stale_for=3600)
    cache.get_or_load("org:42", lambda: VALUE)
    plain = {"org:42": VALUE}

    @functools.lru_cache(maxsize=10_000)
    def lru(key: str) -> dict[str, Any]:
        return VALUE

    lru("org:42")
    loader = lambda: VALUE  # noqa: E731 - the same loader object every call, as in a service
    print("memory cache hit (mean per call; median / best of rounds)")
    results = {
        "dict.get": best_of(rounds, lambda: plain.get("org:42"), calls),
        "functools.lru_cache": best_of(rounds, lambda: lru("org:42"), calls),
        "StaleCache.get_or_load": best_of(
            rounds, lambda: cache.get_or_load("org:42", loader), calls),
        "StaleCache.lookup": best_of(rounds, lambda: cache.lookup("org:42", loader), calls),
    }
    for name, (median, best) in results.items():
        print(f"  {name:<24} {median * 1e6:7.2f} µs   best {best * 1e6:7.2f} µs")
    hit = results["StaleCache.get_or_load"][0] * 1e6
    print(f"  -> a hit costs {hit:.2f} µs (goal < 5 µs: {'met' if hit < 5 else 'NOT met'})")


def redis_figures(server: RedisServer, rounds: int, calls: int) -> None:
    backend = RedisBackend(server.url, timeout=2)
    cache = StaleCache(backend, fresh_for=3600, stale_for=3600)
    cache.get_or_load("org:42", lambda: VALUE)
    bare = server.client()
    raw_key = backend.prefix + "org:42"  # the same stored bytes, read without pgsteady
    loader = lambda: VALUE  # noqa: E731
    limiter = KeyedLimiter(1_000_000, backend=backend, lease=30)
    breaker = CircuitBreaker("bench")

    def hold() -> None:
        with limiter.hold("org:42"):
            pass

    def guarded() -> None:
        with breaker:
            pass

    peers: dict[str, list[float]] = {"GET": [], "GET+json": [], "cache": [], "hold": []}
    for _ in range(rounds):  # interleaved, so load from other processes hits both alike
        peers["GET"].append(per_call(lambda: bare.get(raw_key), calls))
        peers["GET+json"].append(per_call(
            lambda: json.loads(bare.get(raw_key).partition(b"|")[2]), calls))
        peers["cache"].append(per_call(lambda: cache.get_or_load("org:42", loader), calls))
        peers["hold"].append(per_call(hold, calls // 2))
    get = statistics.median(peers["GET"])
    hit = statistics.median(peers["cache"])
    held = statistics.median(peers["hold"])
    # Each round's ratio against the GET measured just before it: load that comes and goes
    # (other processes on the machine) cancels out better than in a ratio of medians.
    hit_ratio = statistics.median(c / g for c, g in zip(peers["cache"], peers["GET"],
                                                        strict=True))
    hold_ratio = statistics.median(h / g for h, g in zip(peers["hold"], peers["GET"],
                                                         strict=True))
    print(f"redis (loopback TCP, {rounds} interleaved rounds x {calls} calls; medians; "
          f"ratio = median of per-round ratios)")
    print(f"  bare redis-py GET        {get * 1e6:7.1f} µs")
    by_hand = statistics.median(peers["GET+json"])
    print(f"  GET + json.loads         {by_hand * 1e6:7.1f} µs   (what a hand-written "
          f"cache read costs)")
    print(f"  StaleCache hit (Redis)   {hit * 1e6:7.1f} µs   ratio {hit_ratio:.2f}x "
          f"(goal < 1.3x: {'met' if hit_ratio < 1.3 else 'NOT met'})")
    print(f"  KeyedLimiter.hold        {held * 1e6:7.1f} µs   ratio {hold_ratio:.2f}x "
          f"(a script call and a ZREM: two round trips)")
    closed = statistics.median(per_call(guarded, 100_000) for _ in range(rounds))
    print(f"  with breaker: (closed)   {closed * 1e6:7.2f} µs")
    bare.close()
    backend.close()


@contextlib.contextmanager
def hung(server: RedisServer) -> Iterator[None]:
    """SIGSTOP the server for the block (by hand: older checkouts lack ``hung()``)."""
    assert server._proc is not None
    os.kill(server._proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server._proc.pid, signal.SIGCONT)


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _report(label: str, first: float, steady: list[float], stats: Any) -> None:
    state = getattr(stats, "backend_state", "(no breaker)")
    print(f"  {label:<6} first {first * 1e3:7.1f} ms   next {len(steady)}: p50 "
          f"{_percentile(steady, 0.5) * 1e3:7.2f} ms  p99 {_percentile(steady, 0.99) * 1e3:7.2f}"
          f" ms  max {max(steady) * 1e3:7.2f} ms  total {sum(steady):6.2f} s   loads "
          f"{stats.loads}, backend errors {stats.backend_errors}, state {state}")


def hung_figures(server: RedisServer, lookups: int) -> None:
    """Lookup latency of one key while Redis does not answer (default timeout 0.25 s)."""
    print("redis hung (SIGSTOP), RedisBackend default timeout; a key cached before the hang; "
          "the loader returns at once")
    backend = RedisBackend(server.url)
    cache = StaleCache(backend, fresh_for=3600, stale_for=3600)
    cache.get_or_load("org:42", lambda: VALUE)
    with hung(server):
        took = []
        for _ in range(lookups + 1):
            start = time.perf_counter()
            cache.get_or_load("org:42", lambda: VALUE)
            took.append(time.perf_counter() - start)
    _report("sync", took[0], took[1:], cache.stats())
    backend.close()

    async def load() -> dict[str, Any]:
        return VALUE

    async def run() -> None:
        abackend = RedisBackend(server.url)
        acache = AsyncStaleCache(abackend, fresh_for=3600, stale_for=3600)
        await acache.get_or_load("org:42", load)
        with hung(server):
            took = []
            for _ in range(lookups + 1):
                start = time.perf_counter()
                await acache.get_or_load("org:42", load)
                took.append(time.perf_counter() - start)
        _report("async", took[0], took[1:], acache.stats())
        await abackend.aclose()

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--hung-lookups", type=int, default=100)
    parser.add_argument("--only", default="memory,redis,hung",
                        help="comma-separated sections to run")
    args = parser.parse_args()
    sections = set(args.only.split(","))
    if "memory" in sections:
        memory(args.rounds)
    if not sections & {"redis", "hung"}:
        return
    who = _process.run_as()
    workdir = make_workdir(None, who, prefix="pgsteady-bench-")
    server = RedisServer(workdir, who=who)
    try:
        server.start()
        if "redis" in sections:
            redis_figures(server, args.rounds, args.calls)
        if "hung" in sections:
            hung_figures(server, args.hung_lookups)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
