"""``pgsteady exporter``: Prometheus ``/metrics`` for a PostgreSQL and a PgBouncer.

Exit codes: 0 stopped by SIGINT/SIGTERM, 1 cannot listen, 2 usage error.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any

from pgsteady.cli import _sources
from pgsteady.errors import EXIT_OK, PgsteadyError, UsageError

log = logging.getLogger("pgsteady.cli")
# Not 9187: that is postgres_exporter's, often on the same host. Prometheus' exporter range
# (9100-9999) is fully allocated, so pgsteady takes a port outside it.
DEFAULT_LISTEN = "127.0.0.1:19187"


def listen_address(text: str) -> tuple[str, int]:
    """``"127.0.0.1:19187"``, ``"[::1]:19187"`` or ``":19187"`` (loopback) -> (host, port)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not HOST:PORT; write it like 127.0.0.1:19187 (port 0: any free one)")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "exporter", help="serve Prometheus /metrics for a PostgreSQL and a PgBouncer",
        description="Serve /metrics: lock queues, blocking roots, long and idle transactions, "
                    "the xmin horizon and connection use from PostgreSQL (--dsn); pool use, "
                    "waiting clients and pools stuck refilling from PgBouncer's admin console "
                    "(--pgbouncer); not-ready closures and dropped cancels from its log "
                    "(--pgbouncer-log). Read on each scrape, each source within "
                    "--scrape-timeout (a source that does not answer is pgsteady_up 0). Rules "
                    "for these metrics: pgsteady alerts.",
        epilog="exit codes: 0 stopped by Ctrl-C or SIGTERM, 1 cannot listen, 2 usage error")
    _sources.add_sources(parser)
    parser.add_argument("--listen", type=listen_address, default=DEFAULT_LISTEN,
                        metavar="HOST:PORT", help=f"where to serve (default {DEFAULT_LISTEN})")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pgsteady.inspect.exporter import Exporter, serve

    if args.scrape_timeout <= 0:
        raise UsageError("--scrape-timeout must be more than 0, e.g. 3s")
    dsn, pgbouncer, pgbouncer_log = _sources.sources(args)
    host, port = args.listen
    exporter = Exporter(dsn, pgbouncer, pgbouncer_log, timeout=args.scrape_timeout)
    try:
        # A source given in the wrong place is refused now; one that is down may come back.
        _sources.refuse_misconfigured(exporter.scrape(quiet=True))
        try:
            server = serve(exporter, host, port)
        except OSError as exc:
            raise PgsteadyError(f"cannot listen on {host}:{port}: {exc.strerror}; choose "
                                f"another --listen") from None
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set())
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            bound_host, bound_port = server.server_address
            print(f"pgsteady exporter: serving http://{_url_host(str(bound_host))}:{bound_port}"
                  f"/metrics ({', '.join(exporter.sources)})", file=sys.stderr, flush=True)
            while not stop.wait(3600):  # until a signal; the server runs on its own thread
                pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            server.stop()
    finally:
        exporter.close()
    log.info("exporter stopped")
    return EXIT_OK


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
