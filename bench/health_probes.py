"""Readiness latency under concurrent probes while the database is black-holed (issue 31, item 2).

A burst of load-balancer or kubelet probes must not wait for each other: every probe should be
answered within the readiness timeout plus a little HTTP, however many arrive together. For each
way of serving :class:`pgsteady.health.Health`:

- ``serve``: ``health.serve()`` (the bounded stdlib server, 4 workers) over a ``Database``;
- ``uvicorn``: ``health.asgi()`` under uvicorn over a ``Database`` (checks in threads);
- ``uvicorn-async``: the same over an ``AsyncDatabase`` (checks in uvicorn's loop);

it black-holes PostgreSQL behind a fault proxy, then sends ``--rounds`` rounds of ``--probes``
readiness probes, in ``--waves`` waves spread over one timeout (so later waves arrive while the
first wave's checks run), and prints p50/p99/max latency, the statuses, and how many probes took
longer than the timeout + 0.5 s.

    .venv/bin/python bench/health_probes.py [--probes 50] [--rounds 5] [--waves 2] [--timeout 1]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from pgsteady import AsyncDatabase, Database
from pgsteady.health import Health, db_check
from pgsteady.lab import _process
from pgsteady.lab.cluster import Postgres, make_workdir
from pgsteady.lab.proxy import FaultProxy
from pgsteady.testing.http_load import Answer, burst, percentile

KINDS = ("serve", "uvicorn", "uvicorn-async")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def uvicorn_app(app: Any) -> Iterator[int]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def async_db_app(dsn: str, timeout: float) -> Any:
    """An ASGI app whose lifespan opens an AsyncDatabase in uvicorn's loop."""
    state: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    db = AsyncDatabase(dsn, pool_size=2, connect_timeout=2)
                    await db.open()
                    await db.wait(10)
                    health = Health({"db": db_check(db)}, timeout=timeout)
                    state.update(db=db, health=health, app=health.asgi())
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    state["health"].close()
                    await asyncio.wait_for(state["db"].close(1.0), 5)
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await state["app"](scope, receive, send)
    return app


@contextmanager
def serving(kind: str, dsn: str, timeout: float) -> Iterator[int]:
    if kind == "uvicorn-async":
        with uvicorn_app(async_db_app(dsn, timeout)) as port:
            yield port
        return
    with Database(dsn, pool_size=2, connect_timeout=2) as db:
        db.wait(10)
        health = Health({"db": db_check(db)}, timeout=timeout)
        try:
            if kind == "serve":
                with health.serve(0) as server:
                    yield server.port
            else:
                with uvicorn_app(health.asgi()) as port:
                    yield port
        finally:
            health.close()


def one_round(port: int, probes: int, waves: int, timeout: float) -> list[Answer]:
    """``probes`` readiness probes in ``waves`` bursts started ``timeout / waves`` apart."""
    answers: list[Answer] = []
    sizes = [probes // waves + (i < probes % waves) for i in range(waves)]

    def wave(i: int) -> None:
        time.sleep(i * timeout / waves)
        answers.extend(burst(port, sizes[i], "/health/ready", within=30))

    threads = [threading.Thread(target=wave, args=(i,)) for i in range(waves)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def measure(kind: str, dsn: str, proxy: FaultProxy, args: argparse.Namespace) -> None:
    with serving(kind, dsn, args.timeout) as port:
        warm = burst(port, 1, "/health/ready", within=10)
        if warm[0].status != 200:
            raise RuntimeError(f"{kind}: not ready before the black hole: {warm[0]}")
        proxy.blackhole(True)
        try:
            answers: list[Answer] = []
            for _ in range(args.rounds):
                answers += one_round(port, args.probes, args.waves, args.timeout)
                time.sleep(0.2)
        finally:
            proxy.blackhole(False)
    took = [a.seconds for a in answers]
    late = sum(t > args.timeout + 0.5 for t in took)
    statuses = Counter(f"{a.status} busy" if a.body.startswith(b"busy") else a.status or a.error
                       for a in answers)
    print(f"{kind:14} p50 {percentile(took, 0.5) * 1000:7.0f} ms  p99 "
          f"{percentile(took, 0.99) * 1000:7.0f} ms  max {max(took) * 1000:7.0f} ms  "
          f"late {late:3}/{len(took)}  statuses {dict(statuses)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probes", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--waves", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--kind", choices=KINDS, action="append",
                        help="measure only these (repeatable)")
    args = parser.parse_args()
    who = _process.run_as()
    workdir = make_workdir(None, who, prefix="pgsteady-bench-")
    server = Postgres(workdir, who=who)
    try:
        server.start()
        with FaultProxy(server.port) as proxy:
            dsn = (f"host=127.0.0.1 port={proxy.port} dbname=postgres user=postgres "
                   f"passfile={server.passfile}")
            print(f"{args.probes} readiness probes x {args.rounds} rounds in {args.waves} "
                  f"wave(s), timeout {args.timeout:g} s, PostgreSQL black-holed", flush=True)
            for kind in args.kind or KINDS:
                measure(kind, dsn, proxy, args)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
