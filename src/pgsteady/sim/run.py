"""One simulated run, and a set of runs as a :class:`PoolDrainResult` — the lab's own result
type, so the lab's tables, charts and JSON reader handle the model's output unchanged
(``"source": "sim"``).

Randomness: every run draws from its own generators seeded by ``(seed, strategy, run)``, and
the stalls of run ``r`` by ``(seed, r)`` only, so every strategy meets the same stalls.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Callable
from typing import Any

from pgsteady._version import __version__
from pgsteady.lab.scenarios.pool_drain import (
    COUNTERS,
    SAMPLE_EVERY,
    PoolDrainResult,
    RunResult,
    verdict,
)
from pgsteady.sim.clients import SteadyCaller, SteadyDatabase, WireWorker
from pgsteady.sim.config import SimConfig
from pgsteady.sim.engine import Engine
from pgsteady.sim.pooler import Pooler
from pgsteady.sim.server import Server, stall_windows
from pgsteady.sim.tally import Tally

MODEL_VERSION = 1
Progress = Callable[[str, float], None]


class _Sampler:
    """SHOW POOLS every 200 ms, summed over the poolers: cl_waiting, sv_active, sv_login."""

    def __init__(self, engine: Engine, poolers: list[Pooler], duration: float) -> None:
        self.engine, self.poolers, self.duration = engine, poolers, duration
        self.samples: list[tuple[float, int, int, int]] = []
        self.tick = 0

    def sample(self, _: Any) -> None:
        pools = self.poolers
        self.samples.append((self.engine.now, sum(len(p.waiting) for p in pools),
                             sum(p.active for p in pools), sum(p.login for p in pools)))
        self.tick += 1
        at = self.tick * SAMPLE_EVERY
        if at < self.duration:
            self.engine.at(at, self.sample)


def simulate(config: SimConfig, strategy: str, run: int) -> tuple[RunResult, int]:
    """One run of one strategy; returns its result and the number of events it took.

    The cyclic garbage collector is paused meanwhile: a collapse parks millions of closed
    client connections, which refcounting frees, and full collections over them would
    dominate the run."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _simulate(config, strategy, run)
    finally:
        if was_enabled:
            gc.enable()


def _simulate(config: SimConfig, strategy: str, run: int) -> tuple[RunResult, int]:
    engine = Engine()
    rng = random.Random(f"{config.seed}:{strategy}:{run}")
    stalls = stall_windows(config, random.Random(f"{config.seed}:stalls:{run}"))
    server = Server(config, rng, stalls)
    tally = Tally(config.duration)
    poolers = [Pooler(engine, server, tally, pool_size=config.pool_size,
                      min_pool_size=config.min_pool,
                      connect_latency=config.connect_latency + config.login_time,
                      cancel_latency=config.connect_latency,
                      query_wait_timeout=config.query_wait_timeout,
                      server_login_retry=config.server_login_retry)
               for _ in range(config.poolers)]
    for pooler in poolers:
        pooler.prefill(config.duration)
    dbs = [SteadyDatabase(engine, pooler, pool_size=config.client_pool,
                          max_waiting=config.backlog_bound, turnaround=config.client_turnaround,
                          connect_time=config.client_connect_time) for pooler in poolers] \
        if strategy == "steady" else []
    shifts = [(config.workers, 0.0, config.duration)]
    if config.burst_workers:
        shifts.append((config.burst_workers, config.burst_start, config.burst_end))
    index = 0
    for workers, start, stop in shifts:
        for _ in range(workers):
            # The lab's workers start within a millisecond; with a think time, each starts
            # at a random point of its cycle (a fleet's clients are not synchronised).
            at = start + rng.random() * (0.001 + config.think_time)
            where = index % config.poolers
            index += 1
            client: WireWorker | SteadyCaller
            if strategy == "steady":
                client = SteadyCaller(engine, dbs[where], tally, stop=stop,
                                      deadline=config.deadline,
                                      turnaround=config.client_turnaround,
                                      think_time=config.think_time)
            else:
                client = WireWorker(engine, poolers[where], tally, mode=strategy, stop=stop,
                                    deadline=config.deadline, cancel_delay=config.cancel_delay,
                                    turnaround=config.client_turnaround,
                                    think_time=config.think_time,
                                    connect_time=config.client_connect_time)
            engine.at(at, client.begin)
    sampler = _Sampler(engine, poolers, config.duration)
    engine.at(0.0, sampler.sample)
    engine.run(config.duration)
    return _summarise(strategy, run, tally, sampler.samples), engine.events


def _summarise(strategy: str, run: int, tally: Tally,
               samples: list[tuple[float, int, int, int]]) -> RunResult:
    rows: list[dict[str, Any]] = []
    for t in range(tally.seconds):
        pools = [s for s in samples if t <= s[0] < t + 1]
        rows.append({
            "t": t,
            "answered": tally.answered[t],
            "timeouts": tally.timeouts[t],
            "rejected": tally.rejected[t],
            "db_completions": tally.db_completions[t],
            "server_connections_opened": tally.server_connections_opened[t],
            "not_ready_closures": tally.not_ready_closures[t],
            "cl_waiting": max((s[1] for s in pools), default=0),
            "sv_active": _mean([s[2] for s in pools]),
            "sv_login": _mean([s[3] for s in pools]),
        })
    totals: dict[str, Any] = {key: sum(r[key] for r in rows) for key in COUNTERS}
    totals["cl_waiting"] = max((r["cl_waiting"] for r in rows), default=0)
    totals["sv_active"] = _mean([r["sv_active"] for r in rows])
    totals["sv_login"] = _mean([r["sv_login"] for r in rows])
    collapsed, recovered = verdict([r["answered"] for r in rows])
    return RunResult(strategy, run, collapsed, recovered, rows, totals,
                     dropped_cancels=sum(tally.dropped_cancels[:tally.seconds]),
                     errors=sum(tally.errors[:tally.seconds]), driver_cpu_seconds=0.0)


def run_model(config: SimConfig, progress: Progress | None = None) -> PoolDrainResult:
    """Every strategy x run of ``config``, as the lab would report them."""
    report = progress or (lambda label, seconds: None)
    runs = []
    for strategy in config.strategies:
        for index in range(1, config.runs + 1):
            result, _ = simulate(config, strategy, index)
            runs.append(result)
            report(f"{strategy} run {index}", config.duration)
    return PoolDrainResult(
        config.lab_config(), config.predicted_ceiling(), runs,
        {"postgresql": "model", "pgbouncer": f"model v{MODEL_VERSION}",
         "pgsteady": __version__},
        source="sim", extra_config=config.model_knobs())


def _mean(values: list[int] | list[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0
