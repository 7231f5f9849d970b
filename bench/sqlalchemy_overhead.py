"""What Steady / AsyncSteady cost over a plain SQLAlchemy Session / AsyncSession, same server.

Prints p50/p99 latency (one caller, back-to-back calls) and throughput (8 concurrent callers,
engine pool of 4) for ``select 1`` and a 5 ms query, each in its own committed transaction,
sync and async, through ``scalar`` (a Core statement runs alone, in autocommit) and through
``run`` (``fn(session)`` in a committed transaction). The two sides are measured
interleaved, in short alternating slices, so that a machine whose speed drifts (other
processes) charges both alike.
Goal: p50 <= 1.10x a plain session on ``select 1``.

    .venv/bin/python bench/sqlalchemy_overhead.py [--seconds 3] [--slices 6]
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from pgsteady.lab.cluster import Cluster
from pgsteady.sqlalchemy import AsyncSteady, Steady, url_from_dsn

QUERIES = {"select 1": text("select 1"), "5 ms query": text("select pg_sleep(0.005)")}
POOL = 4
CALLERS = 8

SyncCall = Callable[[], Any]
AsyncCall = Callable[[], Awaitable[Any]]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def sync_slice(call: SyncCall, seconds: float, samples: list[float]) -> None:
    end = time.perf_counter() + seconds
    while (start := time.perf_counter()) < end:
        call()
        samples.append(time.perf_counter() - start)


def sync_throughput_slice(call: SyncCall, seconds: float) -> int:
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
    return sum(counts)


async def async_slice(call: AsyncCall, seconds: float, samples: list[float]) -> None:
    end = time.perf_counter() + seconds
    while (start := time.perf_counter()) < end:
        await call()
        samples.append(time.perf_counter() - start)


async def async_throughput_slice(call: AsyncCall, seconds: float) -> int:
    count = 0
    end = time.perf_counter() + seconds

    async def caller() -> None:
        nonlocal count
        while time.perf_counter() < end:
            await call()
            count += 1

    await asyncio.gather(*(caller() for _ in range(CALLERS)))
    return count


def row(kind: str, label: str, peer: tuple[list[float], float],
        ours: tuple[list[float], float]) -> None:
    (p_lat, p_tps), (o_lat, o_tps) = peer, ours
    p50p, p99p = percentile(p_lat, 0.5), percentile(p_lat, 0.99)
    p50o, p99o = percentile(o_lat, 0.5), percentile(o_lat, 0.99)
    print(f"{kind:5s} {label:17s} | session p50 {p50p * 1e6:6.0f} us p99 {p99p * 1e6:6.0f} us"
          f" {p_tps:6.0f}/s | steady p50 {p50o * 1e6:6.0f} us p99 {p99o * 1e6:6.0f} us"
          f" {o_tps:6.0f}/s | ratio p50 {p50o / p50p:4.2f}x p99 {p99o / p99p:4.2f}x "
          f"throughput {p_tps / o_tps:4.2f}x", flush=True)


def bench_sync(url: Any, seconds: float, slices: int) -> None:
    plain_engine: Engine = create_engine(url, pool_size=POOL, max_overflow=0)
    steady_engine: Engine = create_engine(url, pool_size=POOL, max_overflow=0)
    steady = Steady(steady_engine, max_waiting=64)
    try:
        for label, statement in QUERIES.items():
            def plain(s: Any = statement) -> Any:
                with Session(plain_engine) as session, session.begin():
                    return session.scalar(s)

            def scalar(s: Any = statement) -> Any:
                return steady.scalar(s, deadline=5.0)

            def run(s: Any = statement) -> Any:
                return steady.run(lambda session: session.scalar(s), deadline=5.0)

            for form, ours in (("scalar", scalar), ("run", run)):
                lat: dict[SyncCall, list[float]] = {plain: [], ours: []}
                done: dict[SyncCall, int] = {plain: 0, ours: 0}
                for call in (plain, ours):  # warm both: every connection open, caches filled
                    sync_throughput_slice(call, 0.3)
                for _ in range(slices):
                    for call in (plain, ours):
                        sync_slice(call, seconds / slices, lat[call])
                        done[call] += sync_throughput_slice(call, seconds / slices)
                row("sync", f"{label} {form}", (lat[plain], done[plain] / seconds),
                    (lat[ours], done[ours] / seconds))
    finally:
        steady.close()
        plain_engine.dispose()
        steady_engine.dispose()


async def bench_async(url: Any, seconds: float, slices: int) -> None:
    plain_engine: AsyncEngine = create_async_engine(url, pool_size=POOL, max_overflow=0)
    steady_engine: AsyncEngine = create_async_engine(url, pool_size=POOL, max_overflow=0)
    steady = AsyncSteady(steady_engine, max_waiting=64)
    try:
        for label, statement in QUERIES.items():
            async def plain(s: Any = statement) -> Any:
                async with AsyncSession(plain_engine) as session, session.begin():
                    return await session.scalar(s)

            async def scalar(s: Any = statement) -> Any:
                return await steady.scalar(s, deadline=5.0)

            async def run(s: Any = statement) -> Any:
                async def fn(session: AsyncSession) -> Any:
                    return await session.scalar(s)
                return await steady.run(fn, deadline=5.0)

            for form, ours in (("scalar", scalar), ("run", run)):
                lat: dict[AsyncCall, list[float]] = {plain: [], ours: []}
                done: dict[AsyncCall, int] = {plain: 0, ours: 0}
                for call in (plain, ours):
                    await async_throughput_slice(call, 0.3)
                for _ in range(slices):
                    for call in (plain, ours):
                        await async_slice(call, seconds / slices, lat[call])
                        done[call] += await async_throughput_slice(call, seconds / slices)
                row("async", f"{label} {form}", (lat[plain], done[plain] / seconds),
                    (lat[ours], done[ours] / seconds))
    finally:
        await steady.aclose()
        await plain_engine.dispose()
        await steady_engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="per side and measurement (latency, throughput)")
    parser.add_argument("--slices", type=int, default=6, help="alternations per measurement")
    args = parser.parse_args()
    with Cluster(pool_size=POOL) as cluster:
        url = url_from_dsn(cluster.direct_dsn())
        print(f"PostgreSQL {cluster.postgres.version() if cluster.postgres else '?'}, direct, "
              f"engine pool {POOL}, {CALLERS} callers for throughput, {args.seconds:g} s per "
              f"side in {args.slices} interleaved slices; ratios are steady / plain session "
              f"(lower is better; throughput: plain/steady)", flush=True)
        bench_sync(url, args.seconds, args.slices)
        asyncio.run(bench_async(url, args.seconds, args.slices))


if __name__ == "__main__":
    main()
