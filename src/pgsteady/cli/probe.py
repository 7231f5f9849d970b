"""``pgsteady probe``: the synthetic check a cron job or CronJob runs every 5 minutes, or
that Prometheus scrapes (``--listen``: each scrape runs it).

Exit codes: 0 every check answered within its deadline, 1 a check failed (an error, a
timeout, a non-200), 2 usage error, 3 a check reached nothing (cannot connect); with
``--listen``: 0 stopped by Ctrl-C or SIGTERM, 1 cannot listen, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pgsteady.cli._args import duration
from pgsteady.cli.exporter import listen_address
from pgsteady.errors import EXIT_CANNOT_CONNECT, EXIT_FAILURE, EXIT_OK, PgsteadyError, UsageError


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "probe", help="a synthetic check that needs the database, for Prometheus",
        description="Run a query that needs the database (--dsn, or PGSTEADY_DSN) and/or GET a "
                    "service's deep health check (--url), each within --deadline, and print "
                    "the result as Prometheus metrics (pgsteady_probe_success{probe,check}, "
                    "..._duration_seconds, ..._last_run_timestamp_seconds), or write them "
                    "to --metrics-file for node_exporter's textfile collector. Run it every 5 "
                    "minutes; `pgsteady alerts` pages when it fails or stops running.",
        epilog="exit codes: 0 ok, 1 a check failed, 2 usage error, 3 cannot connect; with "
               "--listen: 0 stopped by Ctrl-C or SIGTERM, 1 cannot listen, 2 usage error")
    parser.add_argument("--dsn", help="the database to query (default: PGSTEADY_DSN)")
    parser.add_argument("--url", help="a service's deep health check, e.g. "
                                      "http://api:8000/health/deep")
    parser.add_argument("--query", default=None,
                        help="the query to run (default: select 1); a read the service needs")
    parser.add_argument("--name", default=None,
                        help="the probe label (default: database / http)")
    parser.add_argument("--deadline", type=duration, default=5.0,
                        help="time each check has, e.g. 5s (default 5s)")
    parser.add_argument("--metrics-file", metavar="PATH",
                        help="write the metrics there (atomically) instead of stdout")
    parser.add_argument("--listen", type=listen_address, metavar="HOST:PORT",
                        help="serve /metrics instead, running the checks on each scrape "
                             "(scrape it every 5m, scrape_timeout above --deadline)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import os

    from pgsteady.inspect import probe

    dsn = args.dsn if args.dsn is not None else os.environ.get("PGSTEADY_DSN")
    if dsn is None and args.url is None:
        raise UsageError("pgsteady probe needs --dsn (or PGSTEADY_DSN) for the database "
                         "check, --url for a deep health check, or both")
    if args.deadline <= 0:
        raise UsageError("--deadline must be more than 0, e.g. 5s")
    if args.query is not None and dsn is None:
        raise UsageError("--query needs --dsn (or PGSTEADY_DSN): it runs on the database")
    if args.metrics_file and args.listen:
        raise UsageError("--metrics-file and --listen are two ways to publish the result; "
                         "choose one")
    if args.metrics_file:
        probe.check_path(args.metrics_file)  # a bad path fails before any check runs
    if args.url is not None:
        probe.http_url(args.url)

    def checks() -> list[probe.ProbeResult]:
        results = []
        if dsn is not None:
            results.append(probe.database(dsn, name=args.name or "database",
                                          query=args.query or probe.DEFAULT_QUERY,
                                          deadline=args.deadline))
        if args.url is not None:
            results.append(probe.http(args.url, name=(args.name or "http") if dsn is None
                                      else "http", deadline=args.deadline))
        return results

    if args.listen:
        return _serve(probe.Probing(checks), *args.listen)
    results = checks()
    text = probe.exposition(results)
    if args.metrics_file:
        probe.write_textfile(args.metrics_file, text)
    else:
        sys.stdout.write(text)
    for result in results:
        if not result.success:
            print(f"pgsteady probe: {result.name} ({result.check}) failed: {result.error}",
                  file=sys.stderr)
    if any(not r.reached for r in results):
        return EXIT_CANNOT_CONNECT
    return EXIT_OK if all(r.success for r in results) else EXIT_FAILURE


def _serve(probing: Any, host: str, port: int) -> int:
    import signal
    import threading

    from pgsteady.inspect.probe import serve

    try:
        server = serve(probing, host, port)
    except OSError as exc:
        raise PgsteadyError(f"cannot listen on {host}:{port}: {exc.strerror}; choose another "
                            "--listen") from None
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        bound_host, bound_port = server.server_address
        shown = f"[{bound_host}]" if ":" in str(bound_host) else bound_host
        print(f"pgsteady probe: serving http://{shown}:{bound_port}/metrics", file=sys.stderr,
              flush=True)
        while not stop.wait(3600):  # until a signal; the server runs on its own threads
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop()
    return EXIT_OK
