"""``pgsteady lab``: the embedded cluster as a sandbox (``lab up``) and the lab scenarios."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import Any

import psycopg

from pgsteady.cli import _args
from pgsteady.errors import EXIT_OK
from pgsteady.lab.cluster import Cluster


def register(verbs: Any) -> None:
    lab = verbs.add_parser("lab", help="the embedded PostgreSQL + PgBouncer lab")
    scenarios = lab.add_subparsers(dest="scenario", metavar="SCENARIO", required=True)

    up = scenarios.add_parser(
        "up", help="start PostgreSQL + PgBouncer (+ proxy) on loopback until Ctrl-C",
        description="Start a throwaway PostgreSQL and a PgBouncer in front of it, print the "
                    "direct, pooled and admin DSNs, and keep them up until Ctrl-C.")
    up.add_argument("--pool-mode", default="transaction",
                    choices=["session", "transaction", "statement"])
    up.add_argument("--pool-size", type=_args.positive_int, default=4)
    up.add_argument("--min-pool-size", type=_args.non_negative_int, default=0)
    up.add_argument("--max-client-conn", type=_args.positive_int, default=1000)
    up.add_argument("--query-wait-timeout", type=_args.duration, default=120.0)
    up.add_argument("--proxy", action="store_true",
                    help="put the fault proxy between PgBouncer and PostgreSQL")
    up.add_argument("--connect-latency", type=_args.duration, default=0.0,
                    help="proxy delay per new server connection, e.g. 50ms (implies --proxy)")
    up.add_argument("--pg-port", type=_args.port, help="PostgreSQL port (default: a free one)")
    up.add_argument("--pgbouncer-port", type=_args.port,
                    help="PgBouncer port (default: a free one)")
    up.add_argument("--dir", help="where to create the lab directory (default: the temp dir)")
    up.add_argument("--keep", action="store_true", help="keep the data directory afterwards")
    up.add_argument("--once", action="store_true",
                    help="run one query through PgBouncer, print versions and logs, shut down")
    up.set_defaults(run=run_up)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run_up(args: argparse.Namespace) -> int:
    cluster = Cluster(
        pool_mode=args.pool_mode, pool_size=args.pool_size, min_pool_size=args.min_pool_size,
        max_client_conn=args.max_client_conn, query_wait_timeout=args.query_wait_timeout,
        proxy=args.proxy, connect_delay=args.connect_latency, pg_port=args.pg_port,
        pgbouncer_port=args.pgbouncer_port, base_dir=args.dir, keep=args.keep,
    )
    signal.signal(signal.SIGTERM, _raise_interrupt)  # `kill` shuts down as cleanly as Ctrl-C
    with cluster:
        assert cluster.postgres is not None and cluster.pgbouncer is not None
        out = sys.stdout
        print(f"direct:  {cluster.direct_dsn()}", file=out)
        print(f"pooled:  {cluster.pooled_dsn()}", file=out)
        print(f"admin:   {cluster.admin_dsn}", file=out)
        if cluster.proxy is not None:
            print(f"proxy:   127.0.0.1:{cluster.proxy.port} -> PostgreSQL "
                  f"(+{args.connect_latency * 1000:.0f} ms per new server connection)", file=out)
        print(f"logs:    {cluster.postgres.log_path}", file=out)
        print(f"         {cluster.pgbouncer.log_path}", file=out)
        if args.once:
            with psycopg.connect(cluster.pooled_dsn(), prepare_threshold=None) as conn:
                row = conn.execute("select version()").fetchone()
            pgb = cluster.pgbouncer.admin("SHOW VERSION")
            print(f"query through PgBouncer ok: {row[0] if row else '?'}", file=out)
            print(f"pgbouncer: {next(iter(pgb[0].values())) if pgb else '?'}", file=out)
            return EXIT_OK
        print("up; press Ctrl-C to stop", file=sys.stderr, flush=True)
        threading.Event().wait()  # until Ctrl-C or SIGTERM
    return EXIT_OK
