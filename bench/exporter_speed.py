"""How fast a ``pgsteady exporter`` scrape answers on a busy server: 500 sessions in 20 lock
chains (built as ``bench/blockers_speed.py`` builds them: a root, a waiting ALTER, 23 reads).

Prints, over ``--runs``:

- a real HTTP scrape of ``GET /metrics`` from an in-process exporter (the server thread,
  the collector, a new PostgreSQL connection and the snapshot: what Prometheus waits for);
- the collection alone (``Exporter.scrape()``, no HTTP);
- the peer, in the same run on the same server: a bare ``SELECT * FROM pg_stat_activity``
  on a new connection (the least any exporter must do), and on an open one;
- the ratio of the HTTP scrape to the peer connecting.

Goal: a scrape with 500 sessions answers in under 300 ms.

    .venv/bin/python bench/exporter_speed.py [--runs 20] [--chains 20] [--per-chain 25]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import urllib.request
from typing import Any

import psycopg

from blockers_speed import build, timed, wait_for
from pgsteady.inspect.exporter import Exporter, serve
from pgsteady.lab import _process
from pgsteady.lab.cluster import Postgres, make_workdir

PEER = "SELECT * FROM pg_stat_activity"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--chains", type=int, default=20)
    parser.add_argument("--per-chain", type=int, default=25)
    args = parser.parse_args()
    sessions = args.chains * args.per_chain
    who = _process.run_as()
    workdir = make_workdir(None, who, prefix="pgsteady-bench-")
    server = Postgres(workdir, who=who, settings={"max_connections": sessions + 50})
    conns: list[psycopg.Connection[Any]] = []
    exporter: Exporter | None = None
    httpd = None
    try:
        server.start()
        dsn = server.dsn()
        print(f"building {args.chains} chains x {args.per_chain} sessions ...", file=sys.stderr)
        conns = build(dsn, args.chains, args.per_chain)
        wait_for(dsn, args.chains * (args.per_chain - 1))

        exporter = Exporter(dsn, timeout=5.0)
        first = exporter.scrape()
        queues = first.values["pgsteady_lock_queue_length"]
        assert first.up == {"postgres": True}, first.errors
        assert len(queues) == args.chains and all(v == args.per_chain - 1 for _, v in queues)

        httpd = serve(exporter)
        url = f"http://127.0.0.1:{httpd.port}/metrics"

        def http_scrape() -> None:
            with urllib.request.urlopen(url, timeout=10) as answer:
                body = answer.read()
            assert b'pgsteady_up{source="postgres"} 1.0' in body

        http = timed(http_scrape, args.runs)
        collect = timed(exporter.scrape, args.runs)

        def peer_connecting() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(PEER).fetchall()

        peer_new = timed(peer_connecting, args.runs)
        with psycopg.connect(dsn, autocommit=True) as conn:
            peer = timed(lambda: conn.execute(PEER).fetchall(), args.runs)
    finally:
        if httpd is not None:
            httpd.stop()
        if exporter is not None:
            exporter.close()
        for conn in conns:
            conn.close()
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    def line(name: str, samples: list[float]) -> str:
        return (f"{name:46} p50 {statistics.median(samples) * 1000:7.1f} ms   worst "
                f"{max(samples) * 1000:7.1f} ms")

    print(f"{sessions} sessions, {args.chains} chains, "
          f"{args.chains * (args.per_chain - 1)} waiting; {args.runs} runs")
    print(line("GET /metrics (HTTP, new connection, snapshot)", http))
    print(line("  the collection alone (Exporter.scrape)", collect))
    print(line("peer: pg_stat_activity, connecting first", peer_new))
    print(line("peer: pg_stat_activity on an open connection", peer))
    print(f"ratio GET /metrics / peer connecting: "
          f"{statistics.median(http) / statistics.median(peer_new):.2f}x (p50)")
    load = os.getloadavg()[0]
    print(f"goal, a scrape under 300 ms: p50 {statistics.median(http) * 1000:.0f} ms, worst "
          f"{max(http) * 1000:.0f} ms ({'met' if max(http) < 0.3 else 'NOT met'} at worst; "
          f"load average {load:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
