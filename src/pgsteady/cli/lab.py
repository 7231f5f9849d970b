"""``pgsteady lab``: the embedded cluster as a sandbox (``lab up``) and the lab scenarios."""

from __future__ import annotations

import argparse
import contextlib
import functools
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import psycopg

from pgsteady.cli import _args, _knobs
from pgsteady.errors import EXIT_OK, UsageError
from pgsteady.lab.cluster import Cluster
from pgsteady.lab.knobs import ClusterKnobs
from pgsteady.lab.scenarios.registry import Scenario
from pgsteady.lab.scenarios.registry import scenarios as all_scenarios


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
    _knobs.add_options(up, ClusterKnobs)  # --durable, and whatever the lab's server takes
    up.add_argument("--dir", help="an existing directory to create the lab's private "
                                  "directory in (default: the temp dir)")
    up.add_argument("--keep", action="store_true", help="keep the data directory afterwards")
    up.add_argument("--redis", action="store_true",
                    help="also start a password-protected Redis (the guards' shared store)")
    up.add_argument("--once", action="store_true",
                    help="run one query through PgBouncer, print versions and logs, shut down")
    up.set_defaults(run=run_up)

    for scenario in all_scenarios():
        _register_scenario(scenarios, scenario)


def _register_scenario(scenarios: Any, scenario: Scenario) -> None:
    """``pgsteady lab <name>``: the scenario's knobs as options (its config record declares
    them, :mod:`pgsteady.lab.knobs`), then where its results go."""
    parser = scenarios.add_parser(scenario.name, help=scenario.help,
                                  description=scenario.description)
    _knobs.add_options(parser, scenario.config)
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--out", metavar="DIR", help="write JSON and PNG charts to DIR")
    parser.add_argument("--dir", help="an existing directory to create the lab's private "
                                      "directory in (default: the temp dir)")
    parser.set_defaults(run=functools.partial(run_scenario, scenario))


def _stop_on_signals() -> None:
    """SIGINT and SIGTERM end the run cleanly, also when started with ``&`` from a script
    (which starts it with SIGINT ignored, and Python then leaves it ignored). SIGTERM keeps
    its own exception, so the exit code says which it was: 130 for SIGINT, 143 for SIGTERM."""
    from pgsteady.cli import _raise_terminated

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_terminated)


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
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from pgsteady.cli._console import console

    err = console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task("starting the lab", total=total)

        def advance(label: str, seconds: float) -> None:
            progress.update(task, description=label, advance=seconds)

        with _logs_above_the_bar():
            return run(config, advance, base_dir=base_dir)


@contextlib.contextmanager
def _logs_above_the_bar() -> Iterator[None]:
    """Log lines go through the progress bar's own stderr while it is shown, which prints
    them above the bar; the handler ``-v`` set up kept the real stderr and wrote its lines
    onto the bar's line ("... 0:00:23pgsteady.lab: lab cluster up")."""
    logging = sys.modules.get("logging")
    redirected = sys.stderr  # rich's proxy while the bar is live on a terminal
    if logging is None or redirected is sys.__stderr__:
        yield
        return
    handlers = [h for h in logging.getLogger().handlers
                if isinstance(h, logging.StreamHandler) and h.stream is sys.__stderr__]
    for handler in handlers:
        handler.setStream(redirected)
    try:
        yield
    finally:
        for handler in handlers:
            handler.setStream(sys.__stderr__)


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
    server = ClusterKnobs(**_knobs.given(ClusterKnobs, args))
    cluster = Cluster(
        pool_mode=args.pool_mode, pool_size=args.pool_size, min_pool_size=args.min_pool_size,
        max_client_conn=args.max_client_conn, query_wait_timeout=args.query_wait_timeout,
        proxy=args.proxy, connect_delay=args.connect_latency, pg_port=args.pg_port,
        pgbouncer_port=args.pgbouncer_port, base_dir=args.dir, keep=args.keep,
        redis=args.redis, durable=server.durable, pg_version=server.pg_version,
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


# What a scenario runs that the `lab` extra brings: looked for before anything starts (the
# lock-queue lab's replicas are uvicorn processes; without uvicorn each died at start and the
# run waited 60 s for them, then pointed at the log folder it had just deleted).
_SCENARIO_MODULES = {"lock-queue": ("uvicorn",)}


def _require_extras(name: str, args: argparse.Namespace) -> None:
    """The `lab` extra's modules this run needs, found without importing them, or a
    MissingExtra (one line, exit 2) at once."""
    import importlib.util

    from pgsteady._extras import MissingExtra

    wanted = [*_SCENARIO_MODULES.get(name, ()), *(("matplotlib",) if args.out else ())]
    absent = [module for module in wanted if importlib.util.find_spec(module) is None]
    if absent:
        raise MissingExtra(", ".join(absent), "lab", f"pgsteady lab {name}")


def run_scenario(scenario: Scenario, args: argparse.Namespace) -> int:
    """Run one scenario as its options say, print its tables and write its files."""
    from pgsteady.cli._console import console

    config = scenario.config(**scenario.prepare(_knobs.given(scenario.config, args)))
    _check_outputs(args, scenario.json_name)
    _require_extras(scenario.name, args)
    _stop_on_signals()
    out = console()
    result = _with_progress(scenario.run, config, scenario.seconds(config), args.dir)
    report = scenario.report_module()
    for table in report.tables(result):
        out.print(table)
    write_outputs(report, result, args, scenario.json_name)
    return EXIT_OK
