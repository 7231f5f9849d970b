"""The ``pgsteady`` command: one module per verb, errors as one line, documented exit codes.

Exit codes: 0 ok, 1 findings or failure, 2 usage error, 3 cannot connect.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from pgsteady._errors_root import EXIT_CANNOT_CONNECT, EXIT_FAILURE, EXIT_USAGE, PgsteadyError
from pgsteady._version import __version__

# Verb modules (pgsteady.cli.<name>), imported only when needed: a verb on the command line
# loads its own module alone, so `pgsteady lint` never imports psycopg.
VERBS = ("lab", "lint", "migrate", "preflight", "report", "alerts")


def _verb(name: str) -> Any:
    return importlib.import_module(f"pgsteady.cli.{name}")


def _chosen_verb(argv: Sequence[str]) -> str | None:
    """The verb named on the command line, if any (before it come only options)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in VERBS else None
    return None


def scrub(text: str) -> str:
    """:func:`pgsteady.settings.scrub`, imported when an error is printed."""
    from pgsteady.settings import scrub as scrub_dsn

    return scrub_dsn(text)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (the full usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pgsteady",
        description="Keep PostgreSQL-backed services standing; reproduce outages in a lab.",
        epilog="exit codes: 0 ok, 1 findings or failure, 2 usage error, 3 cannot connect",
    )
    parser.add_argument("--version", action="version", version=f"pgsteady {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log more to stderr (-vv for debug)")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name in VERBS:
        if only is None or name == only:
            _verb(name).register(verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_chosen_verb(arguments))
    args = parser.parse_args(arguments)
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
    except Exception as exc:
        psycopg: Any = sys.modules.get("psycopg")  # only a verb that imported it can raise it
        if psycopg is None or not isinstance(exc, psycopg.Error):
            raise
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
