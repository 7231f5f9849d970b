"""Django's connection settings against pgbench: CONN_MAX_AGE=0, CONN_MAX_AGE=60, and Django
5.1's ``OPTIONS["pool"]``, each as a fraction of what pgbench gets on the same server.

A throwaway PostgreSQL and a PgBouncer (transaction mode) in front of it; ``--clients``
threads each run "requests" for ``--seconds``: Django's request cycle (``close_old_connections``
before and after, as the request_started/finished signals do) around one query (``--query``,
by default 5 ms of the server's time) through the ENGINE ``pgsteady.django``. pgbench runs
the same statement with as many clients, on persistent connections and with ``-C`` (a new
connection per transaction, what CONN_MAX_AGE=0 does)::

    python bench/django_connections.py --clients 8 --seconds 3
    python bench/django_connections.py --query "SELECT 1"    # Python's overhead instead

Each Django setting runs in a child process of its own (Django is configured once per
process). Short runs on a shared machine: read the ratios, not the third digit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MODES = {  # name -> (CONN_MAX_AGE, Django's pool option)
    "CONN_MAX_AGE=0": (0, False),
    "CONN_MAX_AGE=60": (60, False),
    "OPTIONS pool": (0, True),
}


def child(dsn: str, pooler: str, mode: str, clients: int, seconds: float, *,
          query: str) -> None:
    """One Django setting's requests per second, printed as JSON."""
    from django.conf import settings
    from psycopg.conninfo import conninfo_to_dict

    import django

    params = conninfo_to_dict(dsn)
    max_age, pool = MODES[mode]
    options: dict[str, object] = {"pgsteady": {"pooler": pooler}}
    if "passfile" in params:
        options["passfile"] = params["passfile"]
    if pool:
        options["pool"] = {"min_size": clients, "max_size": clients}
    settings.configure(
        INSTALLED_APPS=["pgsteady.django"], USE_TZ=True,
        DATABASES={"default": {
            "ENGINE": "pgsteady.django", "NAME": params.get("dbname", "postgres"),
            "USER": params.get("user", ""), "HOST": params.get("host", ""),
            "PORT": params.get("port", ""), "CONN_MAX_AGE": max_age, "OPTIONS": options}})
    django.setup()
    from django.db import close_old_connections, connection

    counts = [0] * clients
    end = time.monotonic() + seconds

    def requests(slot: int) -> None:
        try:
            while time.monotonic() < end:
                close_old_connections()  # request_started
                with connection.cursor() as cursor:
                    cursor.execute(query)
                    cursor.fetchone()
                close_old_connections()  # request_finished
                counts[slot] += 1
        finally:
            connection.close()

    threads = [threading.Thread(target=requests, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 60)
    print(json.dumps({"rps": sum(counts) / seconds}))


def django_rps(dsn: str, pooler: str, mode: str, clients: int, seconds: float, *,
               query: str) -> float:
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get(
        "PYTHONPATH")]))}
    done = subprocess.run([sys.executable, __file__, "--child", mode, "--dsn", dsn, "--pooler",
                           pooler, "--clients", str(clients), "--seconds", str(seconds),
                           "--query", query],
                          capture_output=True, text=True, timeout=seconds + 120, check=False,
                          env=env)
    if done.returncode != 0:
        raise SystemExit(f"{mode}: {done.stderr.strip().splitlines()[-1:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["rps"])


def pgbench_tps(dsn: str, clients: int, seconds: float, query: str, *,
                reconnect: bool) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(f"{query};\n")
    try:
        done = subprocess.run(
            ["pgbench", "-n", "-M", "simple", "-f", script.name, "-c", str(clients), "-j",
             str(clients), "-T", str(max(1, round(seconds))), *(["-C"] if reconnect else []),
             dsn], capture_output=True, text=True, timeout=seconds + 60, check=False)
    finally:
        os.unlink(script.name)
    found = re.search(r"tps = ([\d.]+)", done.stdout)
    if done.returncode != 0 or not found:
        raise SystemExit(f"pgbench failed: {done.stderr.strip()[-300:]}")
    return float(found.group(1))


def measure(label: str, dsn: str, pooler: str, clients: int, seconds: float, *,
            query: str) -> None:
    base = pgbench_tps(dsn, clients, seconds, query, reconnect=False)
    print(f"\n{label}: pgbench {base:8.0f} tps (persistent connections)", flush=True)
    fresh = pgbench_tps(dsn, clients, seconds, query, reconnect=True)
    print(f"  {'pgbench -C':18} {fresh:8.0f}  {fresh / base:5.2f} of pgbench", flush=True)
    for mode in MODES:
        rps = django_rps(dsn, pooler, mode, clients, seconds, query=query)
        print(f"  {mode:18} {rps:8.0f}  {rps / base:5.2f} of pgbench", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--pool-size", type=int, default=8, help="PgBouncer's pool_size")
    parser.add_argument("--query", default="SELECT pg_sleep(0.005)",
                        help="one request's statement (default: 5 ms in the server, as a "
                             "view's query; SELECT 1 measures Python's overhead instead)")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    parser.add_argument("--pooler", default="direct", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.dsn, args.pooler, args.child, args.clients, args.seconds, query=args.query)
        return
    from pgsteady.lab.cluster import Cluster

    with Cluster(pool_size=args.pool_size, pool_mode="transaction") as cluster:
        print(f"{args.clients} clients, {args.seconds:g} s each; requests/s of {args.query!r} "
              f"through Django's request cycle, as a fraction of pgbench's tps")
        measure("direct", cluster.direct_dsn(), "direct", args.clients, args.seconds,
                query=args.query)
        measure(f"PgBouncer (transaction, pool_size {args.pool_size})", cluster.pooled_dsn(),
                "transaction", args.clients, args.seconds, query=args.query)


if __name__ == "__main__":
    main()
