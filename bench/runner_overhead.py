"""What pgsteady's deadline-safe runner costs over plain psycopg_pool, on the same server.

Prints p50/p99 latency (one caller, back-to-back calls) and throughput (8 concurrent callers,
pool of 4) for ``select 1`` and a 5 ms query, sync and async, with pgsteady / psycopg_pool
ratios. Goals: async <= 1.05x and sync <= 1.10x on ``select 1`` (issue 29); <= 1.02x on
the 5 ms query. Latency is measured in short alternating slices (``--slices``), so a drift in
the host's speed, or in where the scheduler puts the server's processes, falls on both sides.

    .venv/bin/python bench/runner_overhead.py [--seconds 3] [--slices 6]
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from psycopg_pool import AsyncConnectionPool, ConnectionPool

from pgsteady import AsyncDatabase, Database
from pgsteady.lab.cluster import Cluster

QUERIES = {"select 1": "select 1", "5 ms query": "select pg_sleep(0.005)"}
POOL = 4
CALLERS = 8


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def sync_latency(call: Callable[[], Any], seconds: float) -> list[float]:
    samples = []
    end = time.perf_counter() + seconds
    while (start := time.perf_counter()) < end:
        call()
        samples.append(time.perf_counter() - start)
    return samples


def sync_interleaved(calls: tuple[Callable[[], Any], ...], seconds: float,
                     slices: int) -> list[list[float]]:
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(slices):
        for call, into in zip(calls, samples, strict=True):
            into.extend(sync_latency(call, seconds / slices))
    return samples


def sync_throughput(call: Callable[[], Any], seconds: float) -> float:
    counts = [0] * CALLERS
    end = time.perf_counter() + seconds

    def caller(i: int) -> None:
        while time.perf_counter() < end:
            call()
            counts[i] += 1

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(CALLERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / seconds


async def async_latency(call: Callable[[], Awaitable[Any]], seconds: float) -> list[float]:
    samples = []
    end = time.perf_counter() + seconds
    while (start := time.perf_counter()) < end:
        await call()
        samples.append(time.perf_counter() - start)
    return samples


async def async_interleaved(calls: tuple[Callable[[], Awaitable[Any]], ...], seconds: float,
                            slices: int) -> list[list[float]]:
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(slices):
        for call, into in zip(calls, samples, strict=True):
            into.extend(await async_latency(call, seconds / slices))
    return samples


async def async_throughput(call: Callable[[], Awaitable[Any]], seconds: float) -> float:
    count = 0
    end = time.perf_counter() + seconds

    async def caller() -> None:
        nonlocal count
        while time.perf_counter() < end:
            await call()
            count += 1

    await asyncio.gather(*(caller() for _ in range(CALLERS)))
    return count / seconds


def row(kind: str, label: str, peer: tuple[list[float], float],
        ours: tuple[list[float], float]) -> None:
    (p_lat, p_tps), (o_lat, o_tps) = peer, ours
    p50p, p99p = percentile(p_lat, 0.5), percentile(p_lat, 0.99)
    p50o, p99o = percentile(o_lat, 0.5), percentile(o_lat, 0.99)
    print(f"{kind:5s} {label:10s} | psycopg_pool p50 {p50p * 1e6:7.0f} us p99 {p99p * 1e6:7.0f} us"
          f" {p_tps:7.0f}/s | pgsteady p50 {p50o * 1e6:7.0f} us p99 {p99o * 1e6:7.0f} us"
          f" {o_tps:7.0f}/s | ratio p50 {p50o / p50p:4.2f}x p99 {p99o / p99p:4.2f}x "
          f"throughput {p_tps / o_tps:4.2f}x")


def bench_sync(dsn: str, seconds: float, slices: int) -> None:
    pool: ConnectionPool[Any] = ConnectionPool(dsn, min_size=POOL, max_size=POOL, open=True,
                                               kwargs={"autocommit": True})
    pool.wait()
    db = Database(dsn, pool_size=POOL, max_waiting=64)
    db.wait()
    try:
        for label, query in QUERIES.items():
            def plain(q: str = query) -> Any:
                with pool.connection() as conn:
                    return conn.execute(q).fetchone()

            def steady(q: str = query) -> Any:
                return db.fetchone(q, deadline=5.0)

            for call in (plain, steady):  # warm both
                sync_latency(call, 0.3)
            lat_plain, lat_steady = sync_interleaved((plain, steady), seconds, slices)
            peer = (lat_plain, sync_throughput(plain, seconds))
            ours = (lat_steady, sync_throughput(steady, seconds))
            row("sync", label, peer, ours)
    finally:
        db.close()
        pool.close()


async def bench_async(dsn: str, seconds: float, slices: int) -> None:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn, min_size=POOL, max_size=POOL, open=False, kwargs={"autocommit": True})
    await pool.open(wait=True)
    db = AsyncDatabase(dsn, pool_size=POOL, max_waiting=64)
    await db.open()
    await db.wait()
    try:
        for label, query in QUERIES.items():
            async def plain(q: str = query) -> Any:
                async with pool.connection() as conn:
                    return await (await conn.execute(q)).fetchone()

            async def steady(q: str = query) -> Any:
                return await db.fetchone(q, deadline=5.0)

            for call in (plain, steady):
                await async_latency(call, 0.3)
            lat_plain, lat_steady = await async_interleaved((plain, steady), seconds, slices)
            peer = (lat_plain, await async_throughput(plain, seconds))
            ours = (lat_steady, await async_throughput(steady, seconds))
            row("async", label, peer, ours)
    finally:
        await db.close()
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--slices", type=int, default=6, help="alternating latency slices")
    args = parser.parse_args()
    with Cluster(pool_size=POOL) as cluster:
        dsn = cluster.direct_dsn()
        print(f"PostgreSQL {cluster.postgres.version() if cluster.postgres else '?'}, direct, "
              f"pool {POOL}, {CALLERS} callers for throughput, {args.seconds:g} s each; "
              f"ratios are pgsteady / psycopg_pool (lower is better; throughput: peer/ours)")
        bench_sync(dsn, args.seconds, args.slices)
        asyncio.run(bench_async(dsn, args.seconds, args.slices))


if __name__ == "__main__":
    main()
