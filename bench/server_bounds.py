"""The exporter's HTTP server under abuse, against a throwaway PostgreSQL (issue 27, item 3).

For each server (``after``: :func:`pgsteady.inspect.exporter.serve`, the bounded server;
``before``, with ``--before``: prometheus-client's ``start_http_server``, which the exporter
used until then), prints:

- with ``--idle`` (300) half-sent requests held open: the server's threads, and the latency
  p50/p99/max of ``--runs`` sequential scrapes;
- ``--burst`` (1,000) scrapes sent at once (one client thread, ``selectors``): the server's
  threads at the peak, the answers by status, and the latency p50/p99/max of all of them.

Every connection goes to 127.0.0.1; every client gives up after ``--within`` seconds.

    .venv/bin/python bench/server_bounds.py [--before] [--idle 300] [--burst 1000] [--runs 50]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import start_http_server

from pgsteady.inspect.exporter import Exporter, ExporterCollector, serve
from pgsteady.lab import _process
from pgsteady.lab.cluster import Postgres, make_workdir
from pgsteady.testing.http_load import burst, half_sent, percentile

UP = b'pgsteady_up{source="postgres"} 1.0'


def start(kind: str, exporter: Exporter) -> tuple[int, Callable[[], None]]:
    """Start one kind of server: its port, and how to stop it."""
    if kind == "after":
        server = serve(exporter)
        return server.port, server.stop
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ExporterCollector(exporter))
    httpd, thread = start_http_server(0, "127.0.0.1", registry)

    def stop() -> None:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
    return httpd.server_address[1], stop


def scrape(port: int, within: float) -> float:
    began = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=within) as answer:
        assert UP in answer.read()
    return time.monotonic() - began


def ms(values: list[float]) -> str:
    return (f"p50 {percentile(values, 0.5) * 1000:8.1f} ms  p99 "
            f"{percentile(values, 0.99) * 1000:8.1f} ms  max {max(values) * 1000:8.1f} ms")


def settle(baseline: int, wait: float = 10.0) -> None:
    """Wait (bounded) for threads from the previous case to end."""
    deadline = time.monotonic() + wait
    while threading.active_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.05)


def run(kind: str, exporter: Exporter, args: argparse.Namespace) -> None:
    baseline = threading.active_count()
    port, stop = start(kind, exporter)
    try:
        scrape(port, args.within)  # warm
        socks = half_sent(port, args.idle)
        try:
            time.sleep(1.5)  # read by the server, and old enough to be evicted at the cap
            threads = threading.active_count() - baseline
            latencies = [scrape(port, args.within) for _ in range(args.runs)]
        finally:
            for sock in socks:
                sock.close()
        print(f"{kind:6} {args.idle} half-sent connections open: {threads:4} server threads; "
              f"{args.runs} scrapes {ms(latencies)}")
        settle(baseline + 8)

        peak = [0]
        done = threading.Event()

        def sample() -> None:  # one thread, subtracted below
            while not done.wait(0.02):
                peak[0] = max(peak[0], threading.active_count() - baseline - 1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        began = time.monotonic()
        answers = burst(port, args.burst, within=args.within)
        took = time.monotonic() - began
        done.set()
        sampler.join(5)
        statuses = Counter(a.status if a.status else a.error for a in answers)
        waited = sum(a.seconds >= 30 for a in answers)
        print(f"{kind:6} {args.burst} scrapes at once: {peak[0]:4} server threads at peak; "
              f"{dict(statuses)}; all {ms([a.seconds for a in answers])}; "
              f"{waited} waited 30 s or more; burst over in {took:.1f} s")
    finally:
        stop()
        settle(baseline)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", action="store_true",
                        help="also measure prometheus-client's start_http_server")
    parser.add_argument("--idle", type=int, default=300)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--within", type=float, default=90.0,
                        help="each client gives up after this many seconds")
    args = parser.parse_args()
    who = _process.run_as()
    workdir = make_workdir(None, who, prefix="pgsteady-bench-")
    server = Postgres(workdir, who=who)
    exporter: Exporter | None = None
    try:
        server.start()
        exporter = Exporter(server.dsn(), timeout=5.0)
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
              file=sys.stderr)
        for kind in (("before", "after") if args.before else ("after",)):
            run(kind, exporter, args)
    finally:
        if exporter is not None:
            exporter.close()
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
