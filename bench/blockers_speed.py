"""How fast ``pgsteady blockers`` answers on a busy server: 500 sessions in 20 lock chains.

Each chain is seed 002 in small: a root holding ACCESS SHARE on its table in an open
transaction, an ``ALTER TABLE`` waiting for ACCESS EXCLUSIVE behind it, and 23 reads queued
behind the ALTER (20 x 25 = 500 sessions, 480 of them waiting). Prints, over ``--runs``:

- the snapshot + tree in process (``take_snapshot`` + ``as_json``), p50 and worst;
- the whole command, ``pgsteady blockers --json`` as a new process (Python start included),
  wall time and its CPU time (on a machine shared with other work, wall time >> CPU time);
- the floor of any ``pgsteady`` command here: ``pgsteady --version`` (Python start, imports);
- the peer: the one query a hand-written script would run
  (``SELECT pid, pg_blocking_pids(pid) FROM pg_stat_activity WHERE wait_event_type = 'Lock'``),
  in process, on the same server in the same run, on an open connection and connecting first
  (as any command must); and the ratio to the latter.

Goal: the command answers in under 1 s.

    .venv/bin/python bench/blockers_speed.py [--runs 10] [--chains 20] [--per-chain 25]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

import psycopg

from pgsteady.cli.blockers import as_json
from pgsteady.inspect.postgres import take_snapshot
from pgsteady.lab import _process
from pgsteady.lab.cluster import Postgres, make_workdir

PEER = ("SELECT pid, pg_blocking_pids(pid) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock'")


def build(dsn: str, chains: int, per_chain: int) -> list[psycopg.Connection[Any]]:
    """Open every session of every chain; return them (the caller closes them)."""
    conns: list[psycopg.Connection[Any]] = []
    with psycopg.connect(dsn, autocommit=True) as setup:
        for i in range(chains):
            setup.execute(f"CREATE TABLE t{i} (id int)")
    for i in range(chains):
        root = psycopg.connect(dsn, application_name=f"report@bench:{i}")
        root.execute(f"SELECT count(*) FROM t{i}")  # transaction left open
        conns.append(root)
        for j in range(per_chain - 1):
            conn = psycopg.connect(dsn, autocommit=True, application_name=f"api@bench:{i}.{j}",
                                   options="-c statement_timeout=300s")
            sql = f"ALTER TABLE t{i} ADD COLUMN c int" if j == 0 else f"SELECT * FROM t{i}"
            conn.pgconn.send_query(sql.encode())  # never read: it stays queued
            conns.append(conn)
            if j == 0:
                wait_for(dsn, i + 1 + i * (per_chain - 2))  # the ALTER is queued first
    return conns


def wait_for(dsn: str, waiting: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity "
                               "WHERE wait_event_type = 'Lock'").fetchone()
            if row is not None and row[0] >= waiting:
                return
            time.sleep(0.02)
    raise SystemExit(f"only some sessions queued after {timeout:.0f}s; is the machine overloaded?")


def timed(fn: Any, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def child_cpu() -> float:
    """CPU seconds used by finished child processes so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--chains", type=int, default=20)
    parser.add_argument("--per-chain", type=int, default=25)
    args = parser.parse_args()
    sessions = args.chains * args.per_chain
    who = _process.run_as()
    workdir = make_workdir(None, who, prefix="pgsteady-bench-")
    server = Postgres(workdir, who=who, settings={"max_connections": sessions + 50})
    conns: list[psycopg.Connection[Any]] = []
    try:
        server.start()
        dsn = server.dsn()
        print(f"building {args.chains} chains x {args.per_chain} sessions ...", file=sys.stderr)
        conns = build(dsn, args.chains, args.per_chain)
        wait_for(dsn, args.chains * (args.per_chain - 1))

        tree = as_json(take_snapshot(dsn))
        assert len(tree["chains"]) == args.chains, len(tree["chains"])
        assert {c["queued_total"] for c in tree["chains"]} == {args.per_chain - 1}

        inproc = timed(lambda: as_json(take_snapshot(dsn)), args.runs)
        with psycopg.connect(dsn, autocommit=True) as conn:
            peer = timed(lambda: conn.execute(PEER).fetchall(), args.runs)

        def peer_connecting() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(PEER).fetchall()

        peer_new = timed(peer_connecting, args.runs)
        command = [sys.executable, "-m", "pgsteady", "blockers", "--dsn", dsn, "--json"]
        cpu_before, whole_runs = child_cpu(), max(3, args.runs // 3)
        whole = timed(lambda: subprocess.run(command, capture_output=True, check=True,
                                             timeout=60), whole_runs)
        whole_cpu = (child_cpu() - cpu_before) / whole_runs
        floor_cmd = [sys.executable, "-m", "pgsteady", "--version"]
        floor = timed(lambda: subprocess.run(floor_cmd, capture_output=True, check=True,
                                             timeout=60), max(3, args.runs // 3))
    finally:
        for conn in conns:
            conn.close()
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    def line(name: str, samples: list[float]) -> str:
        return (f"{name:44} p50 {statistics.median(samples) * 1000:7.1f} ms   worst "
                f"{max(samples) * 1000:7.1f} ms")

    print(f"{sessions} sessions, {args.chains} chains, "
          f"{args.chains * (args.per_chain - 1)} waiting; {args.runs} runs")
    print(line("blockers snapshot + tree (in process)", inproc))
    print(line("pgsteady blockers --json (new process)", whole))
    print(f"{'  its CPU time (what a quiet machine waits)':44} mean {whole_cpu * 1000:6.1f} ms")
    print(line("  of which: start + imports (pgsteady --version)", floor))
    print(line("peer: pg_blocking_pids query only", peer))
    print(line("peer, connecting first (as a CLI must)", peer_new))
    print(f"ratio in-process / peer connecting: "
          f"{statistics.median(inproc) / statistics.median(peer_new):.2f}x")
    load = os.getloadavg()[0]
    print(f"goal, the command under 1 s: wall worst {max(whole):.2f} s "
          f"({'met' if max(whole) < 1.0 else 'NOT met'}; load average {load:.1f} on "
          f"{os.cpu_count()} cores), CPU {whole_cpu:.2f} s "
          f"({'met' if whole_cpu < 1.0 else 'NOT met'} on a machine to itself)")


if __name__ == "__main__":
    main()
