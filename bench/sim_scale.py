"""How fast the pool-drain model runs, and why it has its own event loop.

1. engines: the same closed-loop pool (clients, a pool of servers, a fixed query time, a
   deadline timer per query) written for SimPy and for ``pgsteady.sim.engine``; the ratio of
   their times is why the model does not use SimPy.
2. seed: the seed's defaults (pool 4, 50 ms, 10 workers + 30 from 5-10 s), 15 simulated
   seconds per strategy (goal: under 2 s of wall time each).
3. scale: 10,000 clients over 8 poolers (pool 20 each, max_connections 200), 0.5 s think time,
   a burst of 20,000 more from 20 to 40 s (3x the load, past the poolers' ceiling), 60 simulated
   seconds per strategy (goal: under 60 s on one core).

CPU time is this process's own (one core); wall time also counts waiting for a core, which
on a shared machine is most of it. Run: ``.venv/bin/python bench/sim_scale.py [--quick]``.
"""

from __future__ import annotations

import argparse
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import simpy

from pgsteady.sim.config import SimConfig
from pgsteady.sim.engine import Engine
from pgsteady.sim.run import simulate


def _timed(work: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def simpy_pool(clients: int, servers: int, hold: float, deadline: float,
               duration: float) -> int:
    env = simpy.Environment()
    pool = simpy.Resource(env, capacity=servers)
    done = [0]

    def client() -> Any:
        while True:
            env.timeout(deadline)  # the deadline timer every query has (not waited on)
            with pool.request() as request:
                yield request
                yield env.timeout(hold)
            done[0] += 1

    for _ in range(clients):
        env.process(client())
    env.run(until=duration)
    return done[0]


def engine_pool(clients: int, servers: int, hold: float, deadline: float,
                duration: float) -> int:
    engine = Engine()
    deadlines = engine.lane(deadline)
    waiting: deque[int] = deque()
    state = {"free": servers, "done": 0}

    def noop(_: Any) -> None:
        pass

    def send(client: int) -> None:
        deadlines.after(noop)
        if state["free"]:
            state["free"] -= 1
            engine.at(engine.now + hold, finish, client)
        else:
            waiting.append(client)

    def finish(client: int) -> None:
        state["done"] += 1
        if waiting:
            engine.at(engine.now + hold, finish, waiting.popleft())
        else:
            state["free"] += 1
        send(client)

    for client in range(clients):
        engine.at(0.0, send, client)
    engine.run(duration)
    return state["done"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs (a smoke test)")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0

    print("1. engines: 40 clients, pool of 4, 5.6 ms queries, 50 ms deadline timers")
    figures = {}
    for name, pool in (("simpy", simpy_pool), ("pgsteady.sim.engine", engine_pool)):
        done, wall, cpu = _timed(lambda pool=pool: pool(40, 4, 0.0056, 0.05, 200 * scale))
        figures[name] = cpu
        print(f"   {name:20} {done:>8} queries  cpu {cpu:6.2f} s  wall {wall:6.2f} s  "
              f"{done / cpu / 1000:6.0f} k queries/cpu-s")
    print(f"   simpy / engine: {figures['simpy'] / figures['pgsteady.sim.engine']:.2f}x "
          f"the CPU time")

    print("2. seed defaults, 15 simulated s (goal < 2 s wall each)")
    seed = SimConfig()
    for strategy in ("naive", "cancel", "psycopg", "steady"):
        (result, events), wall, cpu = _timed(lambda s=strategy: simulate(seed, s, 1))
        verdict = "collapsed" if result.collapsed else "held"
        print(f"   {strategy:8} {verdict:9} {events:>8} events  cpu {cpu:5.2f} s  "
              f"wall {wall:5.2f} s")

    big = SimConfig(workers=10_000, poolers=8, pool_size=20, max_connections=200,
                    think_time=0.5, burst_workers=20_000, burst_start=20 * scale,
                    burst_end=40 * scale, duration=60 * scale)
    print(f"3. scale: 10,000 clients over 8 poolers, {big.duration:g} simulated s "
          f"(goal < 60 s on one core)")
    for strategy in ("naive", "steady"):
        (result, events), wall, cpu = _timed(lambda s=strategy: simulate(big, s, 1))
        verdict = "collapsed" if result.collapsed else "held"
        answered = sum(r["answered"] for r in result.per_second)
        print(f"   {strategy:8} {verdict:9} {events:>9} events  {answered:>9} answered  "
              f"cpu {cpu:6.2f} s  wall {wall:6.2f} s  {events / cpu / 1e6:.2f} M events/cpu-s")


if __name__ == "__main__":
    main()
