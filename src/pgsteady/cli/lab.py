"""``pgsteady lab``: the embedded cluster as a sandbox (``lab up``) and the lab scenarios."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import Any

import psycopg

from pgsteady._docs import LOCK_QUEUE, POOL_DRAIN
from pgsteady.cli import _args
from pgsteady.errors import EXIT_OK, UsageError
from pgsteady.lab.cluster import Cluster


def register(verbs: Any) -> None:
    lab = verbs.add_parser("lab", help="the embedded PostgreSQL + PgBouncer lab")
    scenarios = lab.add_subparsers(dest="scenario", metavar="SCENARIO", required=True)

    up = scenarios.add_parser(
        "up", help="start PostgreSQL + PgBouncer (+ proxy) on loopback until Ctrl-C",
        description="Start a throwaway PostgreSQL and a PgBouncer in front of it, print the "
                    "direct, pooled and admin DSNs, and keep them up until Ctrl-C.")
    up.add_argument("--pool-mode", default="transaction",
                    choices=["session", "transaction", "statement"],
                    help="PgBouncer's pool_mode (default: transaction)")
    up.add_argument("--pool-size", type=_args.positive_int, default=4,
                    help="PgBouncer's default_pool_size: server connections per pool (4)")
    up.add_argument("--min-pool-size", type=_args.non_negative_int, default=0,
                    help="server connections PgBouncer keeps open while it has clients (0)")
    up.add_argument("--max-client-conn", type=_args.positive_int, default=1000,
                    help="client connections PgBouncer accepts (1000)")
    up.add_argument("--query-wait-timeout", type=_args.duration, default=120.0,
                    help="how long PgBouncer lets a client wait for a server (120s)")
    up.add_argument("--proxy", action="store_true",
                    help="put the fault proxy between PgBouncer and PostgreSQL")
    up.add_argument("--connect-latency", type=_args.duration, default=0.0,
                    help="proxy delay per new server connection, e.g. 50ms (implies --proxy)")
    up.add_argument("--pg-port", type=_args.port, help="PostgreSQL port (default: a free one)")
    up.add_argument("--pgbouncer-port", type=_args.port,
                    help="PgBouncer port (default: a free one)")
    up.add_argument("--pg-version", type=_args.positive_int, metavar="N",
                    help="run PostgreSQL major N (13-18; scripts/postgres-versions.sh installs "
                         "them; default: the system's)")
    up.add_argument("--durable", action="store_true",
                    help="run PostgreSQL with fsync and synchronous_commit on (the lab turns "
                         "them off for speed: a crash or an immediate stop then loses commits "
                         "callers were told had succeeded)")
    up.add_argument("--dir", help="an existing directory to create the lab's private "
                                  "directory in (default: the temp dir)")
    up.add_argument("--keep", action="store_true", help="keep the data directory afterwards")
    up.add_argument("--redis", action="store_true",
                    help="also start a password-protected Redis (the guards' shared store)")
    up.add_argument("--once", action="store_true",
                    help="run one query through PgBouncer, print versions and logs, shut down")
    up.set_defaults(run=run_up)

    drain = scenarios.add_parser(
        "pool-drain", help="reproduce the PgBouncer pool drain and show the fix side by side",
        description=f"Reproduce the pool-drain outage ({POOL_DRAIN}): short deadlines "
                    "through PgBouncer with a 50 ms connection cost and a burst. Runs pgbench "
                    "for the ceiling, then each strategy, and prints per-second tables and a "
                    "summary.")
    drain.add_argument("--strategy", default="naive,steady",
                       help="comma-separated: naive, cancel, psycopg, steady, steady-async, "
                            "sqlalchemy, sqlalchemy-steady "
                            "(default: naive,steady)")
    drain.add_argument("--pool-size", type=_args.non_negative_int, default=4,
                       help="PgBouncer's default_pool_size (4)")
    drain.add_argument("--min-pool-size", type=_args.non_negative_int,
                       help="server connections PgBouncer keeps open (default: the pool size)")
    drain.add_argument("--connect-latency", type=_args.duration, default=0.050,
                       help="cost of each new server connection, added by the proxy (50ms)")
    drain.add_argument("--query-time", type=_args.duration, default=0.005,
                       help="how long each query runs on the server (5ms)")
    drain.add_argument("--deadline", type=_args.duration, default=0.050,
                       help="how long each caller waits for its answer (50ms)")
    drain.add_argument("--workers", type=_args.non_negative_int, default=10,
                       help="closed-loop workers running the whole time (10)")
    drain.add_argument("--burst", type=_args.burst, default=None,
                       help="extra workers and when: 30@5s-10s (the default; 0 for none, "
                            "the default with --cold-start)")
    drain.add_argument("--duration", type=_args.duration, default=15.0,
                       help="length of each strategy's run (15s)")
    drain.add_argument("--runs", type=_args.non_negative_int, default=1,
                       help="runs per strategy (1)")
    drain.add_argument("--stall", type=_args.stall,
                       help="hold all proxy traffic once: 100ms@7s")
    drain.add_argument("--cancel-delay", type=_args.duration, default=0.1,
                       help="the cancel strategy's extra wait before it closes (100ms)")
    drain.add_argument("--ceiling-duration", type=_args.duration, default=5.0,
                       help="how long pgbench runs for the ceiling (5s)")
    drain.add_argument("--ceiling-each-run", action="store_true",
                       help="also run pgbench on each run's own cluster just before it and "
                            "compare the run with that (the machine's speed drifts by a few "
                            "%% over minutes); not with --cold-start")
    drain.add_argument("--overcommit", type=_args.non_negative_int, default=None,
                       help="steady's client connections beyond PgBouncer's pool size "
                            "(default 1: keeps every server connection busy)")
    drain.add_argument("--cold-start", action="store_true",
                       help="PgBouncer's pool is empty when the load starts (min_pool_size 0, "
                            "no warm-up query) and, unless --burst is given, there is no "
                            "burst: the seed's cold-start collapse at the steady load")
    drain.add_argument("--json", metavar="FILE", help="write the results as JSON")
    drain.add_argument("--out", metavar="DIR", help="write JSON and PNG charts to DIR")
    drain.add_argument("--pg-version", type=_args.positive_int, metavar="N",
                       help="run PostgreSQL major N (13-18; scripts/postgres-versions.sh installs "
                            "them; default: the system's)")
    drain.add_argument("--durable", action="store_true",
                       help="run PostgreSQL with fsync and synchronous_commit on (the lab turns "
                            "them off for speed: a crash or an immediate stop then loses commits "
                            "callers were told had succeeded)")
    drain.add_argument("--dir", help="an existing directory to create the lab's private "
                                     "directory in (default: the temp dir)")
    drain.set_defaults(run=run_pool_drain)

    _register_lock_queue(scenarios)


def _times(text: str) -> tuple[float, ...]:
    """``"2s,6s"`` -> (2.0, 6.0)."""
    return tuple(_args.duration(part) for part in text.split(",") if part.strip())


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share; write it like 0.6") \
            from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and 1")
    return value


def _register_lock_queue(scenarios: Any) -> None:
    lq = scenarios.add_parser(
        "lock-queue", help="reproduce the blocked migration and restart loop, and the fix",
        description=f"Reproduce the lock-queue outage ({LOCK_QUEUE}): a long dashboard "
                    "log query, a deploy whose migration queues behind it, liveness probes "
                    "that restart gateway replicas, and sessions the killed replicas leave "
                    "behind; then the same deploy under pgsteady. Prints per-second tables "
                    "and a summary.")
    lq.add_argument("--strategy", default="naive,steady",
                    help="comma-separated: naive, steady (default: naive,steady)")
    lq.add_argument("--replicas", type=_args.non_negative_int, default=3,
                    help="gateway replicas, each a uvicorn process with its own pool (3)")
    lq.add_argument("--rate", type=_args.non_negative_int, default=200,
                    help="requests a second over all endpoints (200)")
    lq.add_argument("--cached-share", type=_share, default=0.6,
                    help="share of lookups for organizations in the replicas' cache (0.6)")
    lq.add_argument("--dashboard-share", type=_share, default=0.05,
                    help="share of requests for the dashboard's log page (0.05)")
    lq.add_argument("--duration", type=_args.duration, default=60.0,
                    help="how long each run lasts (60s)")
    lq.add_argument("--deploy-at", type=_args.duration, default=8.0,
                    help="when the new version is deployed (8s)")
    lq.add_argument("--long-query-at", type=_times, default=(2.0, 6.0),
                    help="when dashboard users open the slow log page: 2s,6s")
    lq.add_argument("--long-query-for", type=_args.duration, default=40.0,
                    help="how long the slow log query would run (40s)")
    lq.add_argument("--probe-interval", type=_args.duration, default=1.0,
                    help="how often the supervisor probes each replica (1s)")
    lq.add_argument("--probe-failures", type=_args.non_negative_int, default=3,
                    help="failed probes in a row before a restart or leaving rotation (3)")
    lq.add_argument("--max-connections", type=_args.non_negative_int, default=60,
                    help="PostgreSQL's max_connections, 3 of them reserved (60)")
    lq.add_argument("--lock-timeout", type=_args.duration, default=1.0,
                    help="steady: the migration's lock_timeout cap (1s)")
    lq.add_argument("--log-statement-timeout", type=_args.duration, default=5.0,
                    help="steady: statement_timeout of the bounded log query (5s)")
    lq.add_argument("--runs", type=_args.non_negative_int, default=1,
                    help="runs of each strategy (1)")
    lq.add_argument("--json", metavar="FILE", help="write the results as JSON")
    lq.add_argument("--out", metavar="DIR", help="write JSON and PNG charts to DIR")
    lq.add_argument("--pg-version", type=_args.positive_int, metavar="N",
                    help="run PostgreSQL major N (13-18; scripts/postgres-versions.sh installs "
                         "them; default: the system's)")
    lq.add_argument("--durable", action="store_true",
                    help="run PostgreSQL with fsync and synchronous_commit on (the lab turns "
                         "them off for speed: a crash or an immediate stop then loses commits "
                         "callers were told had succeeded)")
    lq.add_argument("--dir", help="where to create the lab directory (default: temp dir)")
    lq.set_defaults(run=run_lock_queue)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _stop_on_signals() -> None:
    """SIGINT and SIGTERM end the run cleanly, also when started with ``&`` from a script
    (which starts it with SIGINT ignored, and Python then leaves it ignored)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_interrupt)


def _check_outputs(args: argparse.Namespace, name: str) -> None:
    """--json and --out must be writable where they point, checked before a long run starts."""
    from pathlib import Path

    for path in filter(None, (args.json, args.out)):
        parent = Path(path) if path == args.out else Path(path).resolve().parent
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"{parent} is not a directory; choose another --out/--json path")
    if args.json and Path(args.json).is_dir():
        raise UsageError(f"--json {args.json} is a folder; give it a file name such as "
                         f"{Path(args.json) / name}")


def _with_progress(run: Any, config: Any, total: float, base_dir: str | None) -> Any:
    """``run(config, advance, base_dir=...)`` under a progress bar on stderr (a terminal only)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    err = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task("starting the lab", total=total)

        def advance(label: str, seconds: float) -> None:
            progress.update(task, description=label, advance=seconds)

        return run(config, advance, base_dir=base_dir)


def write_outputs(report: Any, result: Any, args: argparse.Namespace, name: str) -> None:
    """--json FILE and --out DIR (JSON as ``name`` plus the charts), each path said on stderr;
    shared by the labs and the model, whose report modules have the same two writers."""
    from pathlib import Path

    if args.json:
        report.write_json(result, Path(args.json))
        print(f"wrote {args.json}", file=sys.stderr)
    if args.out:
        out_dir = Path(args.out)
        report.write_json(result, out_dir / name)
        for chart in report.write_charts(result, out_dir):
            print(f"wrote {chart}", file=sys.stderr)


def run_up(args: argparse.Namespace) -> int:
    cluster = Cluster(
        pool_mode=args.pool_mode, pool_size=args.pool_size, min_pool_size=args.min_pool_size,
        max_client_conn=args.max_client_conn, query_wait_timeout=args.query_wait_timeout,
        proxy=args.proxy, connect_delay=args.connect_latency, pg_port=args.pg_port,
        pgbouncer_port=args.pgbouncer_port, base_dir=args.dir, keep=args.keep,
        redis=args.redis, durable=args.durable, pg_version=args.pg_version,
    )
    _stop_on_signals()  # `kill` shuts down as cleanly as Ctrl-C
    with cluster:
        assert cluster.postgres is not None and cluster.pgbouncer is not None
        out = sys.stdout
        print(f"direct:  {cluster.direct_dsn()}", file=out)
        print(f"pooled:  {cluster.pooled_dsn()}", file=out)
        print(f"admin:   {cluster.admin_dsn}", file=out)
        if cluster.proxy is not None:
            print(f"proxy:   127.0.0.1:{cluster.proxy.port} -> PostgreSQL "
                  f"(+{args.connect_latency * 1000:.0f} ms per new server connection)", file=out)
        if cluster.redis is not None:  # the password stays in the owner-only config file
            print(f"redis:   {cluster.redis.safe_url} (password: requirepass in "
                  f"{cluster.redis.workdir / 'redis.conf'})", file=out)
        print(f"logs:    {cluster.postgres.log_path}", file=out)
        print(f"         {cluster.pgbouncer.log_path}", file=out)
        if args.once:
            # autocommit: a statement pooler refuses the transaction psycopg would open
            with psycopg.connect(cluster.pooled_dsn(), prepare_threshold=None,
                                 autocommit=True) as conn:
                row = conn.execute("select version()").fetchone()
            pgb = cluster.pgbouncer.admin("SHOW VERSION")
            print(f"query through PgBouncer ok: {row[0] if row else '?'}", file=out)
            print(f"pgbouncer: {next(iter(pgb[0].values())) if pgb else '?'}", file=out)
            return EXIT_OK
        print("up; press Ctrl-C to stop", file=sys.stderr, flush=True)
        threading.Event().wait()  # until Ctrl-C or SIGTERM
    return EXIT_OK


def run_pool_drain(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pgsteady.lab import report
    from pgsteady.lab.scenarios.pool_drain import PoolDrainConfig
    from pgsteady.lab.scenarios.pool_drain import run_pool_drain as run

    stall = args.stall or _args.Stall(0.0, 0.0)
    burst = args.burst or (_args.Burst(0, 0.0, 0.0) if args.cold_start
                           else _args.Burst(30, 5.0, 10.0))
    min_pool = (0 if args.cold_start else args.pool_size) if args.min_pool_size is None \
        else args.min_pool_size
    extra = {} if args.overcommit is None else {"overcommit": args.overcommit}
    config = PoolDrainConfig(
        strategies=tuple(s.strip() for s in args.strategy.split(",") if s.strip()),
        pool_size=args.pool_size,
        min_pool_size=min_pool, cold_start=args.cold_start, **extra,
        connect_latency=args.connect_latency, query_time=args.query_time,
        deadline=args.deadline, workers=args.workers, burst_workers=burst.workers,
        burst_start=burst.start, burst_end=burst.end, duration=args.duration,
        runs=args.runs, stall=stall.length, stall_at=stall.at, cancel_delay=args.cancel_delay,
        ceiling_duration=args.ceiling_duration, ceiling_each_run=args.ceiling_each_run,
        durable=args.durable, pg_version=args.pg_version)
    _check_outputs(args, "pool-drain.json")
    _stop_on_signals()
    out = Console(width=None if sys.stdout.isatty() else 200)
    total = config.ceiling_duration + len(config.strategies) * config.runs * config.duration
    result = _with_progress(run, config, total, args.dir)
    for run_result in result.runs:
        if run_result.run == 1:
            out.print(report.per_second_table(run_result, result.pgbench_tps))
    out.print(report.summary_table(result))
    write_outputs(report, result, args, "pool-drain.json")
    return EXIT_OK


def run_lock_queue(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pgsteady.lab import lock_queue_report as report
    from pgsteady.lab.scenarios.lock_queue import LockQueueConfig
    from pgsteady.lab.scenarios.lock_queue import run_lock_queue as run

    config = LockQueueConfig(
        strategies=tuple(s.strip() for s in args.strategy.split(",") if s.strip()),
        replicas=args.replicas, rate=args.rate, cached_share=args.cached_share,
        dashboard_share=args.dashboard_share, duration=args.duration,
        deploy_at=args.deploy_at, long_query_at=args.long_query_at,
        long_query_for=args.long_query_for, probe_interval=args.probe_interval,
        probe_failures=args.probe_failures, max_connections=args.max_connections,
        lock_timeout=args.lock_timeout, log_statement_timeout=args.log_statement_timeout,
        runs=args.runs, durable=args.durable, pg_version=args.pg_version)
    _check_outputs(args, "lock-queue.json")
    _stop_on_signals()
    out = Console(width=None if sys.stdout.isatty() else 200)
    result = _with_progress(run, config, len(config.strategies) * config.runs * config.duration,
                            args.dir)
    for run_result in result.runs:
        if run_result.run == 1:
            out.print(report.per_second_table(run_result))
    out.print(report.summary_table(result))
    write_outputs(report, result, args, "lock-queue.json")
    return EXIT_OK
