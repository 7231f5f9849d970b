"""The ``pgsteady`` command: one module per verb, errors as one line, documented exit codes.

Exit codes: 0 ok, 1 findings or failure, 2 usage error, 3 cannot connect.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

import psycopg

from pgsteady._version import __version__
from pgsteady.cli import alerts, lab, lint, migrate, preflight, report
from pgsteady.errors import EXIT_CANNOT_CONNECT, EXIT_FAILURE, EXIT_USAGE, PgsteadyError
from pgsteady.settings import scrub

VERBS = (lab, lint, migrate, preflight, report, alerts)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (the full usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pgsteady",
        description="Keep PostgreSQL-backed services standing; reproduce outages in a lab.",
        epilog="exit codes: 0 ok, 1 findings or failure, 2 usage error, 3 cannot connect",
    )
    parser.add_argument("--version", action="version", version=f"pgsteady {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log more to stderr (-vv for debug)")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb in VERBS:
        verb.register(verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(name)s: %(message)s", stream=sys.stderr)
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        print("pgsteady: interrupted", file=sys.stderr)
        return 130
    except PgsteadyError as exc:
        print(f"pgsteady: error: {scrub(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        sqlstate = getattr(exc, "sqlstate", None)
        if isinstance(exc, psycopg.OperationalError) and (sqlstate is None
                                                         or sqlstate.startswith("08")):
            print(f"pgsteady: cannot connect: {scrub(first)}", file=sys.stderr)
            return EXIT_CANNOT_CONNECT
        if isinstance(exc, psycopg.ProgrammingError) and exc.sqlstate is None:
            # Raised by the client itself, e.g. for a DSN libpq cannot parse; its message may
            # quote the DSN, password included, so it is not repeated.
            print("pgsteady: error: invalid connection string; check --dsn or PGSTEADY_DSN",
                  file=sys.stderr)
            return EXIT_USAGE
        print(f"pgsteady: database error ({sqlstate or type(exc).__name__}): {scrub(first)}",
              file=sys.stderr)
        return EXIT_FAILURE
    return code
