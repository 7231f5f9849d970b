"""The model against the lab: the same grid of settings run in both, compared cell by cell.

Each (pool size, connect latency) pair is one lab call (one PostgreSQL, pgbench for the
ceiling, then every strategy x run on a fresh PgBouncer) and one model call. The model takes
one measurement from the lab, and not an outcome: the round trips of pgbench with one client
per server connection over the same path (each query's latency less the query time;
:func:`round_trips_from_holds`), which the model then draws from, because the machine's
speed is not something a model of PgBouncer can know. The tail matters as much as the
median: queued queries wait behind every slow one ahead of them, and it is the slowest waits
that first pass the deadline and start the drain. Verdicts and answers per second are then
compared: a cell agrees when the model's most common verdict over its runs is the lab's.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pgsteady import _verdicts
from pgsteady.lab.scenarios.pool_drain import PoolDrainConfig, PoolDrainResult, RunResult
from pgsteady.sim.config import SimConfig, calibrated_round_trip, quantile, round_trips_from_holds
from pgsteady.sim.run import run_model

log = logging.getLogger("pgsteady.sim")

SCHEMA_VERSION = 1
VERDICT_AGREEMENT = 0.90   # share of cells whose verdicts must agree
ANSWERED_TOLERANCE = 0.10  # answered/s, per third, where both hold
STALL = 0.1                # the pool-20 finding: a 100 ms stall during the burst


@dataclass(frozen=True)
class Grid:
    pool_sizes: tuple[int, ...]
    latencies: tuple[float, ...]
    strategies: tuple[str, ...]
    runs: int
    duration: float
    burst: tuple[int, float, float]   # workers, start, end
    stall_at: float
    stall_pools: tuple[int, ...] = (20,)
    ceiling_duration: float = 2.0


FULL = Grid(pool_sizes=(2, 4, 20), latencies=(0.010, 0.050), strategies=("naive", "steady"),
            runs=3, duration=9.0, burst=(30, 3.0, 6.0), stall_at=4.0, ceiling_duration=5.0)
QUICK = Grid(pool_sizes=(2, 4), latencies=(0.050,), strategies=("naive", "steady"), runs=1,
             duration=6.0, burst=(30, 2.0, 4.0), stall_at=3.0, ceiling_duration=2.0)


@dataclass
class Side:
    """One cell's runs, from the lab or the model."""

    verdict: str
    collapsed: int
    runs: int
    answered_thirds: tuple[float, float, float]
    server_connections_opened: float
    verdict_runs: int = 0   # runs whose verdict is ``verdict``

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "verdict_runs": self.verdict_runs,
                "collapsed": self.collapsed, "runs": self.runs,
                "answered_per_second_thirds": [round(v, 1) for v in self.answered_thirds],
                "server_connections_opened": round(self.server_connections_opened, 1)}


@dataclass
class Cell:
    pool_size: int
    connect_latency: float
    stall: float
    strategy: str
    pgbench_tps: float
    round_trip: float
    lab: Side
    model: Side
    round_trip_p99: float | None = None

    @property
    def verdicts_agree(self) -> bool:
        """Same word, or held against recovered: both say the pool was back by the last
        third, which is what the model is checked on (see :func:`side`)."""
        return self.lab.verdict == self.model.verdict or (
            _verdicts.pool_back(self.lab.verdict) and _verdicts.pool_back(self.model.verdict))

    @property
    def answered_difference(self) -> float | None:
        """The largest relative difference in answered/s over the thirds, where both hold."""
        if _verdicts.COLLAPSED.word in (self.lab.verdict, self.model.verdict):
            return None
        return max(abs(m - lab) / lab if lab else (0.0 if not m else 1.0)
                   for lab, m in zip(self.lab.answered_thirds, self.model.answered_thirds,
                                     strict=True))

    def to_json(self) -> dict[str, Any]:
        difference = self.answered_difference
        return {"pool_size": self.pool_size, "connect_latency": self.connect_latency,
                "stall": self.stall, "strategy": self.strategy,
                "pgbench_tps": round(self.pgbench_tps, 1),
                "calibrated_round_trip": round(self.round_trip, 6),
                "calibrated_round_trip_p99": None if self.round_trip_p99 is None
                else round(self.round_trip_p99, 6),
                "lab": self.lab.to_json(), "model": self.model.to_json(),
                "verdicts_agree": self.verdicts_agree,
                "answered_difference": None if difference is None else round(difference, 4)}


@dataclass
class Validation:
    grid: Grid
    cells: list[Cell] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        return sum(c.verdicts_agree for c in self.cells) / len(self.cells) if self.cells \
            else 0.0

    @property
    def worst_answered_difference(self) -> float | None:
        differences = [d for c in self.cells if (d := c.answered_difference) is not None]
        return max(differences) if differences else None

    @property
    def passed(self) -> bool:
        worst = self.worst_answered_difference
        return self.agreement >= VERDICT_AGREEMENT and (worst is None
                                                        or worst <= ANSWERED_TOLERANCE)

    def to_json(self) -> dict[str, Any]:
        worst = self.worst_answered_difference
        return {"schema_version": SCHEMA_VERSION, "scenario": "sim-validate",
                "grid": {"pool_sizes": list(self.grid.pool_sizes),
                         "connect_latencies": list(self.grid.latencies),
                         "strategies": list(self.grid.strategies), "runs": self.grid.runs,
                         "duration": self.grid.duration, "burst": list(self.grid.burst),
                         "stall": {"length": STALL, "at": self.grid.stall_at,
                                   "pool_sizes": list(self.grid.stall_pools)}},
                "verdict_agreement": round(self.agreement, 4),
                "worst_answered_difference": None if worst is None else round(worst, 4),
                "bars": {"verdict_agreement": VERDICT_AGREEMENT,
                         "answered_difference": ANSWERED_TOLERANCE},
                "passed": self.passed,
                "cells": [c.to_json() for c in self.cells]}


LabRunner = Callable[[PoolDrainConfig], PoolDrainResult]  # hold_times wanted


def validate(grid: Grid, lab: LabRunner, *, seed: int = 1,
             progress: Callable[[str], None] | None = None) -> Validation:
    """Run ``grid`` in the lab (through ``lab``) and in the model; compare."""
    say = progress or (lambda message: None)
    result = Validation(grid)
    workers, start, end = grid.burst
    for pool_size in grid.pool_sizes:
        for latency in grid.latencies:
            stall = STALL if pool_size in grid.stall_pools else 0.0
            setting = f"pool {pool_size}, {latency * 1000:g} ms" + \
                (f", {stall * 1000:g} ms stall" if stall else "")
            say(f"lab: {setting}")
            measured = lab(PoolDrainConfig(
                strategies=grid.strategies, pool_size=pool_size, min_pool_size=pool_size,
                connect_latency=latency, duration=grid.duration, burst_workers=workers,
                burst_start=start, burst_end=end, runs=grid.runs, stall=stall,
                stall_at=grid.stall_at if stall else 0.0,
                ceiling_duration=grid.ceiling_duration))
            base = SimConfig()
            samples = round_trips_from_holds(measured.hold_times, base.query_time) or ()
            if samples:
                round_trip, p99 = quantile(samples, 0.5), quantile(samples, 0.99)
            else:
                log.warning("no hold times from the lab; calibrating from pgbench's rate")
                round_trip, p99 = calibrated_round_trip(
                    pgbench_tps=measured.pgbench_tps, workers=base.workers,
                    pool_size=pool_size, query_time=base.query_time,
                    client_turnaround=base.client_turnaround), None
            say(f"model: {setting} (round trip median {round_trip * 1000:.2f} ms"
                + (f", p99 {p99 * 1000:.2f} ms" if p99 is not None else "")
                + f"; pgbench {measured.pgbench_tps:.0f} q/s)")
            modelled = run_model(SimConfig(
                strategies=grid.strategies, pool_size=pool_size, connect_latency=latency,
                duration=grid.duration, burst_workers=workers, burst_start=start,
                burst_end=end, runs=grid.runs, stall=stall,
                stall_at=grid.stall_at if stall else 0.0, round_trip=round_trip,
                round_trip_p99=p99, round_trip_samples=samples, seed=seed))
            for strategy in grid.strategies:
                result.cells.append(Cell(
                    pool_size, latency, stall, strategy, measured.pgbench_tps, round_trip,
                    lab=side([r for r in measured.runs if r.strategy == strategy]),
                    model=side([r for r in modelled.runs if r.strategy == strategy]),
                    round_trip_p99=p99))
    return result


def side(runs: list[RunResult]) -> Side:
    """Summarise one cell's runs: the most common outcome for the pool (collapsed, degraded
    or back; ties: the worse), said in the runs' own words (held or recovered, whichever
    more runs got, for a pool that was back), collapse count, mean answered/s per third,
    mean server connections opened."""
    words = Counter(r.verdict for r in runs)
    back = words[_verdicts.HELD.word] + words[_verdicts.RECOVERED.word]
    outcomes = {_verdicts.COLLAPSED.word: words[_verdicts.COLLAPSED.word],
                _verdicts.DEGRADED.word: words[_verdicts.DEGRADED.word], "back": back}
    order = list(outcomes)
    outcome = max(order, key=lambda w: (outcomes[w], -order.index(w)))
    verdict = outcome if outcome != "back" else (
        _verdicts.HELD.word if words[_verdicts.HELD.word] > words[_verdicts.RECOVERED.word]
        else _verdicts.RECOVERED.word)
    thirds = [thirds_of([row["answered"] for row in r.per_second]) for r in runs]
    mean = tuple(sum(t[i] for t in thirds) / len(thirds) for i in range(3))
    return Side(verdict, sum(r.collapsed for r in runs), len(runs),
                (mean[0], mean[1], mean[2]),
                sum(r.totals["server_connections_opened"] for r in runs) / len(runs),
                verdict_runs=outcomes[outcome])


def thirds_of(values: list[int]) -> tuple[float, float, float]:
    """Mean of the first, middle and last third (the lab's verdict windows)."""
    third = max(1, len(values) // 3)
    middle = values[third:-third] or values
    return (sum(values[:third]) / third, sum(middle) / len(middle),
            sum(values[-third:]) / third)
