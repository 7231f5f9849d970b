"""The model's knobs: the lab's, with the same names and defaults (the outage's setting), plus
what only a model can vary (several poolers, max_connections, random stalls, a seed).

Every knob is checked here, once, so a bad one is one line naming it (the CLI exits 2).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from pgsteady.errors import UsageError
from pgsteady.lab.knobs import knob
from pgsteady.lab.scenarios.pool_drain import PoolDrainConfig, PoolDrainKnobs

STRATEGIES = ("naive", "cancel", "psycopg", "steady")
MAX_CLIENTS = 1_000_000
MAX_DURATION = 3600.0
MAX_SIMULATED = 100_000.0  # simulated seconds in one call, over every run and strategy
_Z99 = 2.3263478740408408  # the standard normal's 99th percentile
# A round trip's p99 over its median on the lab's path (PgBouncer, the fault proxy and
# PostgreSQL sharing two cores): pgbench with one client per server connection, quiet machine,
# median 0.45-0.62 ms, p99 3.5-5.5 ms. The tail, not the median, is what first pushes a queued
# query past its deadline (see server.py).
ROUND_TRIP_TAIL = 7.8


@dataclass(frozen=True)
class SimConfig(PoolDrainKnobs):
    """One setting of the model: the lab's knobs (:class:`PoolDrainKnobs`, the same names,
    defaults and help), then the model's own. Durations in seconds."""

    STRATEGY_CHOICES: ClassVar[tuple[str, ...]] = STRATEGIES

    # Only the model has these.
    query_time_p99: float | None = knob(None, "duration", "lognormal query times with this p99")
    poolers: int = knob(1, "count", "PgBouncer processes, each with its own pool")
    max_connections: int = knob(100, "count", "the server's max_connections")
    query_wait_timeout: float = knob(120.0, "duration", "PgBouncer's query_wait_timeout")
    server_login_retry: float = knob(15.0, "duration", "PgBouncer's server_login_retry")
    login_time: float = knob(0.004, "duration", "a new server connection's time beyond "
                             "--connect-latency: backend start and login")
    round_trip: float = knob(0.00045, "duration", "a server connection's time per query "
                             "beyond the query: the median of a lognormal")
    round_trip_p99: float | None = knob(None, "duration", "its 99th percentile (default: 7.8 "
                                        "x --round-trip, as measured on the lab's path)")
    # Measured round trips to draw from instead (sim validate: the lab's own, see
    # round_trips_from_holds); the median and p99 above then only describe them.
    round_trip_samples: tuple[float, ...] = ()
    client_turnaround: float = knob(0.0002, "duration", "a client's time from a result to "
                                    "its next query")
    client_connect_time: float = knob(0.0004, "duration", "a client's new connection to "
                                      "PgBouncer, SCRAM included")
    think_time: float = knob(0.0, "duration", "each worker's pause between queries (0: "
                             "closed loop)")
    stall_rate: float = knob(0.0, "rate_stalls", "random stalls: RATE/s:MEAN, e.g. "
                             "0.2/s:50ms (Poisson arrivals, exponential lengths)",
                             option="--latency-stalls", parts=("stall_rate", "stall_mean"))
    stall_mean: float = 0.1
    max_waiting: int | None = knob(None, "count", "steady's backlog bound (default: 4 x "
                                   "its pool)")
    seed: int = knob(1, "integer", "the random seed: same seed, same output")

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not self.strategies:
            problems.append("at least one --strategy is needed")
        problems += [f"unknown strategy {s!r} for the model; choose from "
                     f"{', '.join(STRATEGIES)}" for s in self.strategies if s not in STRATEGIES]
        for name in ("pool_size", "poolers", "max_connections", "runs"):
            if getattr(self, name) < 1:
                problems.append(f"--{_flag(name)} must be at least 1, got {getattr(self, name)}")
        if self.min_pool_size is not None and not 0 <= self.min_pool_size <= self.pool_size:
            problems.append("--min-pool-size must be between 0 and --pool-size")
        simulated = self.runs * self.duration * max(len(self.strategies), 1)
        if simulated > MAX_SIMULATED:
            problems.append(f"--runs x --duration x strategies is {simulated:,.0f} simulated s; "
                            f"at most {MAX_SIMULATED:,.0f} in one call")
        if self.workers < 1:
            problems.append(f"--workers must be at least 1, got {self.workers}")
        if self.workers + self.burst_workers > MAX_CLIENTS:
            problems.append(f"at most {MAX_CLIENTS:,} workers in all; lower --workers/--burst")
        if self.query_time <= 0 or self.deadline <= 0:
            problems.append("--query-time and --deadline must be positive durations")
        if self.round_trip_p99 is not None and self.round_trip_p99 < self.round_trip:
            problems.append(f"--round-trip-p99 ({self.round_trip_p99 * 1000:g} ms) must not be "
                            f"below --round-trip, the median ({self.round_trip * 1000:g} ms)")
        if len(self.round_trip_samples) > 1_000_000 or not all(
                math.isfinite(v) and v >= 0 for v in self.round_trip_samples):
            problems.append("round-trip samples must be at most 1,000,000 finite values >= 0")
        if self.query_time_p99 is not None and self.query_time_p99 <= self.query_time:
            problems.append(f"--query-time-p99 ({self.query_time_p99 * 1000:g} ms) must be "
                            f"above --query-time, the median ({self.query_time * 1000:g} ms)")
        if not 0 < self.duration <= MAX_DURATION:
            problems.append(f"--duration must be between 0 and {MAX_DURATION:g} s, "
                            f"got {self.duration:g}")
        if self.burst_workers < 0:
            problems.append("--burst workers must not be negative")
        if self.burst_workers and not 0 <= self.burst_start < self.burst_end <= self.duration:
            problems.append(f"--burst {self.burst_workers}@{self.burst_start:g}s-"
                            f"{self.burst_end:g}s lies outside the {self.duration:g} s run")
        if self.stall and not 0 <= self.stall_at < self.duration:
            problems.append(f"--stall at {self.stall_at:g}s lies outside the "
                            f"{self.duration:g} s run")
        for name in ("connect_latency", "login_time", "stall", "cancel_delay", "round_trip",
                     "client_connect_time",
                     "client_turnaround", "think_time", "stall_rate", "stall_mean"):
            value = getattr(self, name)
            if value < 0 or not math.isfinite(value):
                problems.append(f"--{_flag(name)} must be a finite value >= 0, got {value}")
        if self.query_wait_timeout <= 0 or self.server_login_retry <= 0:
            problems.append("--query-wait-timeout and --server-login-retry must be positive")
        if self.stall_rate and not self.stall_mean:
            problems.append("--latency-stalls needs a positive mean length")
        if self.stall_rate * self.duration > 10_000:
            problems.append("--latency-stalls: at most 10,000 stalls per run; lower the rate")
        if self.overcommit < 0:
            problems.append(f"--overcommit must be 0 or more, got {self.overcommit}")
        if self.max_waiting is not None and self.max_waiting < 1:
            problems.append(f"--max-waiting must be at least 1, got {self.max_waiting}")
        if problems:
            raise UsageError("; ".join(problems))

    # -- derived ----------------------------------------------------------------------------

    @property
    def backlog_bound(self) -> int:
        return 4 * self.client_pool if self.max_waiting is None else self.max_waiting

    @property
    def client_pool(self) -> int:
        """steady's connections to each pooler (pgsteady.Database's pool_size in the lab)."""
        return self.pool_size + self.overcommit

    @property
    def lognormal_sigma(self) -> float:
        """The spread of the query time's logarithm (0 for a fixed query time)."""
        if self.query_time_p99 is None:
            return 0.0
        return math.log(self.query_time_p99 / self.query_time) / _Z99

    @property
    def mean_query_time(self) -> float:
        return self.query_time * math.exp(self.lognormal_sigma ** 2 / 2)

    @property
    def round_trip_sigma(self) -> float:
        """The spread of the round trip's logarithm (0: every round trip the same)."""
        p99 = self.round_trip * ROUND_TRIP_TAIL if self.round_trip_p99 is None \
            else self.round_trip_p99
        if not self.round_trip or p99 <= self.round_trip:
            return 0.0
        return math.log(p99 / self.round_trip) / _Z99

    @property
    def mean_round_trip(self) -> float:
        if self.round_trip_samples:
            return sum(self.round_trip_samples) / len(self.round_trip_samples)
        return self.round_trip * math.exp(self.round_trip_sigma ** 2 / 2)

    def predicted_ceiling(self) -> float:
        """What pgbench would get with ``workers`` clients, in the model: each pooler's servers
        busy back to back when it has more clients than servers, else each client's own cycle."""
        hold = self.mean_query_time + self.mean_round_trip
        total = 0.0
        for index in range(self.poolers):
            clients = self.workers // self.poolers + (index < self.workers % self.poolers)
            if clients > self.pool_size:
                total += self.pool_size / hold
            else:
                total += clients / (hold + self.client_turnaround)
        return total

    def lab_config(self) -> PoolDrainConfig:
        """The lab's view of this setting: the knobs both share (for the JSON and tables)."""
        return PoolDrainConfig(
            strategies=self.strategies, pool_size=self.pool_size, min_pool_size=self.min_pool,
            connect_latency=self.connect_latency, query_time=self.query_time,
            deadline=self.deadline, workers=self.workers, burst_workers=self.burst_workers,
            burst_start=self.burst_start if self.burst_workers else 0.0,
            burst_end=self.burst_end if self.burst_workers else 0.0,
            duration=self.duration, runs=self.runs, stall=self.stall, stall_at=self.stall_at,
            cancel_delay=self.cancel_delay, ceiling_duration=0.0, overcommit=self.overcommit)

    def model_knobs(self) -> dict[str, Any]:
        """The knobs only the model has, for the JSON's ``config``."""
        shared = {f.name for f in fields(PoolDrainConfig)}  # the lab_config() part
        knobs = {k: v for k, v in asdict(self).items() if k not in shared}
        knobs["round_trip_samples"] = len(self.round_trip_samples)  # how many, not each
        return knobs


def calibrated_round_trip(*, pgbench_tps: float, workers: int, pool_size: int,
                          query_time: float, client_turnaround: float) -> float:
    """The median round trip (with the default tail) that makes the model's pgbench ceiling
    equal a measured one: :func:`pgsteady.sim.validate`'s fallback when it has no holds."""
    if pgbench_tps <= 0:
        return SimConfig.round_trip
    if workers > pool_size:
        per_query = pool_size / pgbench_tps
    else:
        per_query = workers / pgbench_tps - client_turnaround
    tail = math.exp((math.log(ROUND_TRIP_TAIL) / _Z99) ** 2 / 2)  # mean over median
    return max(0.0, per_query - query_time) / tail


def round_trips_from_holds(holds: list[float], query_time: float) -> tuple[float, ...] | None:
    """Round trips measured on the lab's path: each hold (pgbench with one client per server
    connection, so no query waits) less the query time, for the model to draw from. Drawn
    as measured, not fitted: the body is narrow and the tail is a few long hiccups, which no
    two-parameter curve gets both right, and the body sets the throughput while the tail is
    what first pushes a queued query past its deadline. None with fewer than 100 holds."""
    if len(holds) < 100:
        return None
    return tuple(sorted(max(0.0, hold - query_time) for hold in holds))


def quantile(values: tuple[float, ...], q: float) -> float:
    """The ``q`` quantile of sorted ``values`` (nearest rank)."""
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def _flag(name: str) -> str:
    return name.replace("_", "-")
