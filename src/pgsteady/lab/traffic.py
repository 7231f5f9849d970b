"""HTTP on loopback for the lock-queue lab: one GET, and an open-loop load generator.

The generator sends ``rate`` requests a second whatever happens to earlier ones (callers do not
slow down when the service does), each with the client timeout of seed 002 (10 s), spread over
three endpoint classes: ``cached`` (a hot organization, in every replica's cache), ``uncached``
(an organization no request asked for before in this run: it needs the database) and
``dashboard`` (the request-log page). Outcomes are counted by the second the request was sent;
a request that finds no ready replica fails at once, as a Kubernetes Service with no endpoints
refuses it. It stops by itself at ``until`` and waits at most one client timeout for stragglers.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

CLASSES = ("cached", "uncached", "dashboard")
HOST = "127.0.0.1"


async def get(port: int, path: str, timeout: float) -> int | None:
    """GET ``path`` on 127.0.0.1:``port``; the status, or None on timeout or no connection."""
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n"
                         .encode())
            await writer.drain()
            line = await reader.readline()
            await reader.read()  # the rest, until the server closes
            parts = line.split()
            return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None
    except (OSError, TimeoutError, ValueError):
        return None
    finally:
        if writer is not None:
            writer.close()


@dataclass(frozen=True)
class Mix:
    """How the ``rate`` splits over the classes; the rest of 1.0 goes to ``uncached``."""

    cached: float = 0.6
    dashboard: float = 0.05

    def pick(self, rnd: random.Random) -> str:
        x = rnd.random()
        if x < self.cached:
            return "cached"
        return "dashboard" if x < self.cached + self.dashboard else "uncached"


@dataclass
class Outcomes:
    """Per second sent: counts per class and outcome, and every latency (ms) for the p99."""

    seconds: int
    ok: dict[str, list[int]] = field(init=False)
    failed: dict[str, list[int]] = field(init=False)
    timed_out: dict[str, list[int]] = field(init=False)
    latencies: list[list[float]] = field(init=False)

    def __post_init__(self) -> None:
        self.ok = {c: [0] * self.seconds for c in CLASSES}
        self.failed = {c: [0] * self.seconds for c in CLASSES}
        self.timed_out = {c: [0] * self.seconds for c in CLASSES}
        self.latencies = [[] for _ in range(self.seconds)]


class LoadGenerator:
    """Open-loop load at ``rate`` a second from ``t0`` until ``t0 + duration``."""

    def __init__(self, *, rate: int, duration: float, t0: float, ready_ports: Callable[[],
                 list[int]], hot_keys: int, first_cold_key: int, org_count: int,
                 client_timeout: float = 10.0, mix: Mix | None = None,
                 max_in_flight: int = 4000, seed: int = 0) -> None:
        self.rate = rate
        self.duration = duration
        self.t0 = t0
        self.ready_ports = ready_ports
        self.hot_keys = hot_keys
        self.org_count = org_count
        self.client_timeout = client_timeout
        self.mix = mix or Mix()
        self.max_in_flight = max_in_flight
        self.outcomes = Outcomes(max(1, round(duration)))
        self._rnd = random.Random(seed)
        self._cold = itertools.count(first_cold_key)
        self._turn = itertools.count()
        self._in_flight: set[asyncio.Task[None]] = set()

    def _path(self, kind: str) -> str:
        if kind == "cached":
            return f"/v1/complete?org={self._rnd.randint(1, self.hot_keys)}"
        if kind == "uncached":
            org = next(self._cold)
            if org > self.org_count:  # more than the table holds: start over (rare)
                self._cold = itertools.count(self.hot_keys + 1)
                org = next(self._cold)
            return f"/v1/complete?org={org}"
        return f"/dashboard/logs?org={self._rnd.randint(1, self.org_count)}"

    async def run(self) -> Outcomes:
        total = int(self.rate * self.duration)
        try:
            for n in range(total):
                at = self.t0 + n / self.rate
                delay = at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                second = min(int(n / self.rate), self.outcomes.seconds - 1)
                kind = self.mix.pick(self._rnd)
                if len(self._in_flight) >= self.max_in_flight:
                    self.outcomes.failed[kind][second] += 1  # the client itself is saturated
                    continue
                task = asyncio.ensure_future(self._one(kind, second))
                self._in_flight.add(task)
                task.add_done_callback(self._in_flight.discard)
            if self._in_flight:
                await asyncio.wait(set(self._in_flight), timeout=self.client_timeout + 2)
        finally:
            for task in list(self._in_flight):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*self._in_flight, return_exceptions=True)
        return self.outcomes

    async def _one(self, kind: str, second: int) -> None:
        ports = self.ready_ports()
        started = time.monotonic()
        if not ports:
            self.outcomes.failed[kind][second] += 1
            self.outcomes.latencies[second].append(0.0)
            return
        port = ports[next(self._turn) % len(ports)]
        status = await get(port, self._path(kind), self.client_timeout)
        spent = (time.monotonic() - started) * 1000
        self.outcomes.latencies[second].append(spent)
        if status == 200:
            self.outcomes.ok[kind][second] += 1
        elif status is None and spent >= self.client_timeout * 1000 * 0.99:
            self.outcomes.timed_out[kind][second] += 1
        else:
            self.outcomes.failed[kind][second] += 1


def p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank), 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.99 * len(ordered)) - 1))]
