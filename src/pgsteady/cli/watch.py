"""``pgsteady watch``: a live view of pools, waits and alerts, refreshed every ``--interval``.

On a terminal, a rich view redrawn in place; without one (or with ``--json-lines``) one JSON
object per interval. Ctrl-C stops it cleanly (exit 0). Exit codes: 0 stopped or ``--count``
reached, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from pgsteady.cli import _args, _sources
from pgsteady.errors import EXIT_OK, UsageError

SCHEMA_VERSION = 1
MIN_INTERVAL = 0.1
TOP = 5  # chains and transactions shown


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "watch", help="live view of pools, waits and alerts",
        description="Every --interval, read PostgreSQL (--dsn), PgBouncer's admin console "
                    "(--pgbouncer) and its log (--pgbouncer-log) as the exporter does, and show "
                    "the pools (cl_active, cl_waiting, sv_active, sv_idle, sv_login, maxwait), "
                    "not-ready closures a minute, connections used, the top blocking chains, "
                    "the longest transactions, and pgsteady's alert rules evaluated in-process "
                    "(pending or firing, and for how long). Without a terminal, or with "
                    "--json-lines, one JSON object per interval.",
        epilog="exit codes: 0 stopped by Ctrl-C or --count reached, 2 usage error")
    _sources.add_sources(parser)
    parser.add_argument("--interval", type=_args.duration, default=1.0,
                        help="time between readings (default 1s, at least 100ms)")
    parser.add_argument("--count", type=_args.positive_int, default=None,
                        help="stop after this many readings (default: until Ctrl-C)")
    parser.add_argument("--config", metavar="FILE",
                        help="alert thresholds and `for` durations (as for pgsteady alerts)")
    parser.add_argument("--json-lines", action="store_true",
                        help="one JSON object per interval, even on a terminal")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pgsteady.inspect.alerts import load_config
    from pgsteady.inspect.evaluate import Evaluator
    from pgsteady.inspect.exporter import Exporter

    if args.interval < MIN_INTERVAL:
        raise UsageError(f"--interval {args.interval:g}s is too short; use at least 100ms")
    if args.scrape_timeout <= 0:
        raise UsageError("--scrape-timeout must be more than 0, e.g. 3s")
    config = load_config(Path(args.config) if args.config else None)
    dsn, pgbouncer, pgbouncer_log = _sources.sources(args)
    # A slow read delays a frame rather than showing a live server as down.
    exporter = Exporter(dsn, pgbouncer, pgbouncer_log, timeout=args.scrape_timeout,
                        label="pgsteady-watch")
    evaluator = Evaluator(config)
    as_lines = args.json_lines or not sys.stdout.isatty()
    try:
        if as_lines:
            _loop(exporter, evaluator, args, lambda view: print(
                json.dumps(view, default=str), flush=True))
        else:
            from rich.live import Live

            from pgsteady.cli._console import console as make_console
            from pgsteady.cli._watch_view import render

            console = make_console(width=None)
            with Live(console=console, auto_refresh=False, transient=False) as live:
                _loop(exporter, evaluator, args,
                      lambda view: live.update(render(view), refresh=True))
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a person stops watching: exit 0
    finally:
        exporter.close()
    return EXIT_OK


def _loop(exporter: Any, evaluator: Any, args: argparse.Namespace, show: Any) -> None:
    started = time.monotonic()
    shown = 0
    while args.count is None or shown < args.count:
        scrape = exporter.scrape(quiet=shown == 0)
        _sources.refuse_misconfigured(scrape)
        show(view_of(scrape, evaluator.update(scrape.values, scrape.at), evaluator,
                     started))
        shown += 1
        if args.count is not None and shown >= args.count:
            break
        time.sleep(max(0.0, started + shown * args.interval - time.monotonic()))


def view_of(scrape: Any, evaluation: Any, evaluator: Any, started: float) -> dict[str, Any]:
    """One interval as plain data: the JSON line, and what the terminal view renders."""
    from pgsteady.inspect.evaluate import window_seconds

    view: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "uptime_s": round(scrape.at - started, 1), "scrape_s": round(scrape.elapsed, 3),
        "up": dict(scrape.up), "errors": dict(scrape.errors)}
    bouncer = scrape.pgbouncer
    if bouncer is not None and bouncer.samples:
        view["pools"] = [
            {"database": p.database, "user": p.user, "cl_active": p.cl_active,
             "cl_waiting": p.cl_waiting, "sv_active": p.sv_active, "sv_idle": p.sv_idle,
             "sv_login": p.sv_login, "maxwait_s": round(p.maxwait, 3),
             "refill_stuck_s": round(scrape.value(
                 "pgsteady_pgbouncer_refill_stuck_seconds", database=p.database,
                 user=p.user) or 0.0, 1)}
            for p in bouncer.samples[-1].pools if p.database != "pgbouncer"]
    if "pgbouncer_log" in scrape.up:
        metric = "pgsteady_pgbouncer_not_ready_closures_total"
        rate = evaluator.per_minute(metric, (), window_seconds("1m"), scrape.at)
        view["not_ready_per_minute"] = None if rate is None else round(rate, 1)
    pg = scrape.postgres
    if pg is not None:
        view["postgres"] = {
            "connections_used": pg.connections_used,
            "connections_usable": pg.usable_connections,
            "idle_in_transaction": pg.idle_in_transaction,
            "xmin_horizon_age_s": round(pg.xmin_horizon_age, 1),
            "chains": [{"root_pid": c.root.pid, "root": c.root.label,
                        "queued": len(c.queued), "longest_wait_s": round(c.longest_wait, 1),
                        "relations": c.queued_per_relation()} for c in pg.chains[:TOP]],
            "longest_transactions": [
                {"pid": s.pid, "application_name": s.label, "state": s.state,
                 "xact_age_s": round(s.xact_age or 0.0, 1)}
                for s in sorted((s for s in pg.client_sessions() if s.xact_age is not None),
                                key=lambda s: -(s.xact_age or 0.0))[:TOP]]}
    view["alerts"] = [a.as_dict() for a in evaluation.active]
    view["alerts_quiet"] = len(evaluation.quiet)
    view["alerts_no_data"] = len(evaluation.no_data)
    return view
