"""PostgreSQL as the poolers see it, through the lab's fault proxy: a connection limit, a query
time distribution, and stalls that hold all traffic between the poolers and the server.

What is not modelled: the server's CPUs (queries never slow each other down), locks, and the
cost of a backend's start beyond the connect latency. The lab's pgbench ceiling is what folds
the machine's real per-query overhead into :attr:`SimConfig.round_trip`.
"""

from __future__ import annotations

import bisect
import random

from pgsteady.sim.config import SimConfig


class Server:
    """One PostgreSQL behind every pooler of a run."""

    __slots__ = ("_rng", "_rt_samples", "_rt_sigma", "_sigma", "_stall_ends", "_stall_starts",
                 "connections", "max_connections", "median", "round_trip")

    def __init__(self, config: SimConfig, rng: random.Random,
                 stalls: list[tuple[float, float]]) -> None:
        self._rng = rng
        self.max_connections = config.max_connections
        self.connections = 0
        self.median = config.query_time
        self._sigma = config.lognormal_sigma
        self.round_trip = config.round_trip
        self._rt_sigma = config.round_trip_sigma
        self._rt_samples = config.round_trip_samples
        merged: list[tuple[float, float]] = []
        for start, end in sorted(stalls):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        self._stall_starts = [start for start, _ in merged]
        self._stall_ends = [end for _, end in merged]

    def query_hold(self) -> float:
        """How long one query holds its server connection: the query (fixed, or lognormal
        when a p99 is given) and a round trip (lognormal: a median and a long tail; or one of
        the measured ones, when given)."""
        rng = self._rng
        query = self.median * rng.lognormvariate(0.0, self._sigma) if self._sigma \
            else self.median
        samples = self._rt_samples
        if samples:
            return query + samples[int(rng.random() * len(samples))]
        rt_sigma = self._rt_sigma
        return query + (self.round_trip * rng.lognormvariate(0.0, rt_sigma) if rt_sigma
                        else self.round_trip)

    def through(self, start: float, duration: float) -> float:
        """When something sent to the server at ``start`` that takes ``duration`` there comes
        back, given the stalls: bytes sent or due back during a stall move at its end."""
        if not self._stall_starts:
            return start + duration
        start = self._after_stall(start)
        return self._after_stall(start + duration)

    def _after_stall(self, t: float) -> float:
        index = bisect.bisect_right(self._stall_starts, t) - 1
        if index >= 0 and t < self._stall_ends[index]:
            return self._stall_ends[index]
        return t

    def connect(self) -> bool:
        """A new server connection, unless ``max_connections`` are open."""
        if self.connections >= self.max_connections:
            return False
        self.connections += 1
        return True

    def disconnect(self) -> None:
        self.connections -= 1


def stall_windows(config: SimConfig, rng: random.Random) -> list[tuple[float, float]]:
    """The run's stalls: the fixed one (``--stall``) and random ones (Poisson arrivals,
    exponential lengths) drawn from ``rng``."""
    windows = []
    if config.stall:
        windows.append((config.stall_at, config.stall_at + config.stall))
    if config.stall_rate:
        t = rng.expovariate(config.stall_rate)
        while t < config.duration:
            windows.append((t, t + rng.expovariate(1.0 / config.stall_mean)))
            t += rng.expovariate(config.stall_rate)
    return windows
