"""The ``pgsteady`` command: one module per verb, errors as one line, documented exit codes.

Exit codes: 0 ok, 1 findings or failure, 2 usage error, 3 cannot connect.

Errors are handled here, once, for every verb: one line on stderr and, when the command line
asks for JSON (``--json``, ``--format json``), also ``{"schema_version": 1, "error": {...}}``
on stdout, so a program reading stdout never gets nothing.
"""

from __future__ import annotations

import argparse
import importlib
import io
import itertools
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from pgsteady._errors_root import EXIT_CANNOT_CONNECT, EXIT_FAILURE, EXIT_USAGE, PgsteadyError
from pgsteady._version import __version__

TYPE_CHECKING = False  # typing is left out of start-up (lint's); mypy reads this as True
if TYPE_CHECKING:
    from typing import Any, NoReturn, TextIO

# Verb modules (pgsteady.cli.<name>), imported only when needed: a verb on the command line
# loads its own module alone, so `pgsteady lint` never imports psycopg.
VERBS = ("lab", "lint", "migrate", "preflight", "report", "alerts", "doctor", "blockers",
         "sim", "exporter", "watch", "completion", "probe")


# What every verb needs beyond the core install: pyproject's `cli` extra (and
# pgsteady._extras.EXTRAS["cli"], which a test keeps equal to this).
CLI_MODULES = ("pglast", "rich", "orjson")


def _missing_cli_modules() -> list[str]:
    """The modules of the `cli` extra that are not installed, looked up without importing
    them or importlib.util (a finder's lookup is cached directory listings: lint's start-up
    does not notice it)."""
    return [name for name in CLI_MODULES if not _installed(name)]


def _installed(name: str) -> bool:
    if name in sys.modules:
        return sys.modules[name] is not None  # None: its import is blocked
    return any(finder.find_spec(name, None) for finder in sys.meta_path
               if hasattr(finder, "find_spec"))


def _verb(name: str) -> Any:
    return importlib.import_module(f"pgsteady.cli.{name}")


def _chosen_verb(argv: Sequence[str]) -> str | None:
    """The verb named on the command line, if any (before it come only options)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in VERBS else None
    return None


def scrub(text: str) -> str:
    """:func:`pgsteady.settings.scrub`, imported when an error is printed (psycopg's
    conninfo comes with it)."""
    from pgsteady.settings import scrub as scrub_dsn

    return scrub_dsn(text)


def describe(exc: BaseException) -> str:
    """:func:`pgsteady.settings.describe`, imported when a database error is printed."""
    from pgsteady.settings import describe as describe_error

    return describe_error(exc)


ERROR_SCHEMA_VERSION = 1


class _UsageExit(Exception):
    """A command-line usage error, raised by the parser that found it (so it names its own
    ``--help``: ``pgsteady lab pool-drain --help``, not ``pgsteady --help``)."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (the full usage is one ``--help`` away)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise _UsageExit(self.prog, message)


def _leaf(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the verb the command line chose, e.g. ``pgsteady lab pool-drain``."""
    current = parser
    while True:
        # argparse keeps its sub-command table in a private action type; reading it is the
        # only way back from a parsed Namespace to the parser that knows the verb's options.
        subs = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, subs[0].dest, None) if subs else None
        if not subs or chosen not in subs[0].choices:
            return current
        current = subs[0].choices[chosen]


def _wants_json(argv: Sequence[str]) -> bool:
    tokens = list(argv)
    return any(t == "--json" or t.startswith("--json=") or t == "--format=json"
               for t in tokens) or any(a == "--format" and b == "json"
                                       for a, b in itertools.pairwise(tokens))


class _Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is: what a verb started (a migration's statement, a lab)
    is cancelled or stopped, instead of the process dying with it still running."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


class _Watched(io.TextIOBase):
    """stdout, noting whether the verb wrote anything to it."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.written = False

    def write(self, text: str) -> int:
        self.written = self.written or bool(text)
        return self.inner.write(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str) -> object:  # buffer, errors, ...: the real stdout's
        return getattr(self.inner, name)

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.inner.encoding


def _fail(code: int, line: str, kind: str, *, as_json: bool) -> int:
    """Report an error: one line on stderr; with JSON asked for, an error object on stdout,
    unless the verb has written its own output there already."""
    print(line, file=sys.stderr)
    out = sys.stdout
    if isinstance(out, _Watched):
        sys.stdout = out.inner
        as_json = as_json and not out.written
    if as_json:
        message = line.split(": ", 2)[-1] if line.startswith("pgsteady") else line
        print(json.dumps({"schema_version": ERROR_SCHEMA_VERSION,
                          "error": {"type": kind, "exit_code": code, "message": message}}),
              flush=True)
    return code


def _configure_logging(verbose: int) -> None:
    """Messages to stderr as ``name: message``, at the level ``-v`` asks for.

    Skipped when nothing asked for more and nothing imported logging (a plain ``lint``): it
    is ~3 ms of start-up, and only debug lines (:mod:`pgsteady._debuglog`) would follow."""
    if not verbose and "logging" not in sys.modules:
        return
    import logging

    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(name)s: %(message)s", stream=sys.stderr)


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, sized without importing shutil.

    argparse builds a formatter for every ``add_argument`` and sizes it with
    ``shutil.get_terminal_size``, so every command paid shutil's import (with bz2 and lzma,
    ~1.3 ms) before doing anything. Same rule: ``COLUMNS``, else the terminal, else 80."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         width if width is not None else _columns() - 2)


def _columns() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    stdout = sys.__stdout__
    try:
        return (os.get_terminal_size(stdout.fileno()).columns if stdout else 0) or 80
    except (AttributeError, ValueError, OSError):
        return 80


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
    _verbose_anywhere(parser)
    return parser


def _verbose_anywhere(parser: argparse.ArgumentParser) -> None:
    """``-v`` after the verb as well as before it (``pgsteady lint -v ...``). argparse parses a
    verb's part of the command line into a namespace of its own, so that part counts into
    ``verbose_after``, which :func:`main` adds to the count before the verb."""
    for action in parser._actions:  # argparse keeps its sub-commands in a private type
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.add_argument("-v", "--verbose", action="count", dest="verbose_after",
                                 default=argparse.SUPPRESS,
                                 help="log more to stderr (-vv for debug)")
                _verbose_anywhere(sub)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(argv)
    verb = _chosen_verb(argv)
    if absent := _missing_cli_modules():
        # `pip install pgsteady` is the library alone: one line saying what brings the rest
        from pgsteady._extras import MissingExtra

        if argv == ["--version"]:
            print(f"pgsteady {__version__}")
            return 0
        missing = MissingExtra(", ".join(absent), "cli",
                               f"pgsteady {verb}" if verb else "the pgsteady command")
        return _fail(missing.exit_code, f"pgsteady: error: {missing}", type(missing).__name__,
                     as_json=as_json)
    parser = build_parser(verb)
    try:
        args, extras = parser.parse_known_args(argv)
        if extras:
            _leaf(parser, args).error(f"unrecognized arguments: {' '.join(extras)}")
    except _UsageExit as exc:
        # SystemExit, as argparse itself does: callers of main() have always seen that.
        raise SystemExit(_fail(EXIT_USAGE, f"{exc.prog}: error: {scrub(str(exc))} "
                               f"(see {exc.prog} --help)", "UsageError", as_json=as_json)) \
            from None
    _configure_logging(args.verbose + getattr(args, "verbose_after", 0))
    out = _Watched(sys.stdout)
    sys.stdout = out  # a verb that already wrote its JSON (its error in it) gets no second one
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous_sigterm = signal.getsignal(signal.SIGTERM)
    if on_main_thread:
        signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        code: int = args.run(args)
    except _Terminated:
        return _fail(143, "pgsteady: terminated (SIGTERM)", "Terminated", as_json=as_json)
    except KeyboardInterrupt:
        return _fail(130, "pgsteady: interrupted", "KeyboardInterrupt", as_json=as_json)
    except PgsteadyError as exc:
        return _fail(exc.exit_code, f"pgsteady: error: {scrub(str(exc))}", type(exc).__name__,
                     as_json=as_json)
    except Exception as exc:
        psycopg: Any = sys.modules.get("psycopg")  # only a verb that imported it can raise it
        if psycopg is None or not isinstance(exc, psycopg.Error):
            raise
        sqlstate = getattr(exc, "sqlstate", None)
        kind = type(exc).__name__
        if isinstance(exc, psycopg.OperationalError) and (sqlstate is None
                                                         or sqlstate.startswith("08")):
            return _fail(EXIT_CANNOT_CONNECT, f"pgsteady: cannot connect: {describe(exc)}",
                         kind, as_json=as_json)
        if isinstance(exc, psycopg.ProgrammingError) and exc.sqlstate is None:
            # Raised by the client itself, e.g. for a DSN libpq cannot parse; its message may
            # quote the DSN, password included, so it is not repeated.
            return _fail(EXIT_USAGE, "pgsteady: error: invalid connection string; check --dsn "
                         "or PGSTEADY_DSN", kind, as_json=as_json)
        return _fail(EXIT_FAILURE, f"pgsteady: database error ({sqlstate or kind}): "
                     f"{describe(exc)}", kind, as_json=as_json)
    finally:
        if sys.stdout is out:
            sys.stdout = out.inner
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous_sigterm if previous_sigterm is not None
                          else signal.SIG_DFL)
    return code
