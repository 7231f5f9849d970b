"""The scrape sources ``exporter`` and ``watch`` share: a PostgreSQL DSN, PgBouncer's admin
console and its log file, and the checks made before the first reading."""

from __future__ import annotations

import argparse
import os
from typing import Any

from pgsteady.cli import _args
from pgsteady.errors import UsageError


def sources(args: argparse.Namespace) -> tuple[str | None, str | None, str | None]:
    """The DSN (``--dsn``, ``PGSTEADY_DSN``, else libpq's PG* variables) and the PgBouncer
    sources; a usage error when none is given."""
    dsn = _args.dsn_from(args)
    if dsn is None and not args.pgbouncer and not args.pgbouncer_log:
        if not _args.libpq_environment():
            raise UsageError("nothing to watch: give --dsn (or PGSTEADY_DSN), --pgbouncer "
                             "ADMIN_DSN and/or --pgbouncer-log FILE")
        dsn = ""
    if dsn:
        _check_dsn(dsn, "--dsn" if args.dsn is not None else "PGSTEADY_DSN")
    if args.pgbouncer:
        _check_dsn(args.pgbouncer, "--pgbouncer")
    if args.pgbouncer_log and not os.path.isfile(args.pgbouncer_log):
        what = "a folder, not a file" if os.path.isdir(args.pgbouncer_log) else "no such file"
        raise UsageError(f"--pgbouncer-log {args.pgbouncer_log}: {what}; pass the file "
                         "PgBouncer's logfile setting names")
    return dsn, args.pgbouncer, args.pgbouncer_log


def _check_dsn(dsn: str, where: str) -> None:
    """A connection string libpq cannot read is a usage error now, not a source shown down on
    every reading. libpq's own message may quote a piece of the string (a password), so it is
    not repeated."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(dsn)
    except ProgrammingError:
        raise UsageError(f"{where} is not a connection string libpq can read (an unclosed "
                         "quote, a missing '='?); write key=value pairs, quoting values with "
                         "spaces in single quotes, or a postgresql:// URL") from None


def add_sources(parser: argparse.ArgumentParser) -> None:
    """Options ``exporter`` and ``watch`` share."""
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: $PGSTEADY_DSN; PG* variables "
                                      "when no other source is given)")
    parser.add_argument("--pgbouncer", metavar="ADMIN_DSN",
                        help="PgBouncer's admin console, e.g. 'host=... port=6432 "
                             "dbname=pgbouncer user=...'")
    parser.add_argument("--pgbouncer-log", metavar="FILE",
                        help="PgBouncer's log file (not-ready closures, dropped cancels)")
    parser.add_argument("--scrape-timeout", type=_args.duration, default=3.0,
                        help="each reading gives up on a source after this long and reports "
                             "it down (default 3s)")


def refuse_misconfigured(scrape: Any) -> None:
    """A source that can never answer as given (the admin console as --dsn) is a usage
    error now, rather than a source shown down forever."""
    if scrape.misconfigured:
        raise UsageError(next(iter(scrape.misconfigured.values())))
