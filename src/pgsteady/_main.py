"""The ``pgsteady`` command's entry point.

A warm ``pgsteady lint`` (nothing changed since the last run with the same arguments) is
answered from :mod:`pgsteady.lint.quick` before the command line, argparse or the
configuration load; everything else goes to :func:`pgsteady.cli.main`. The warm path looks
at the arguments first: with ``--no-cache`` or ``--dsn`` (as argparse would take them) it
reads nothing, not even the cache folder.
"""

from __future__ import annotations

import gc
import os
import sys


def main() -> int:
    """Run ``pgsteady`` with the process's arguments; the exit code.

    A reader that stops early (``pgsteady lint --list-rules | head``) ends the run quietly,
    as with any Unix filter, rather than with a BrokenPipeError traceback."""
    try:
        return _run(sys.argv[1:])
    except BrokenPipeError:
        # Python would report the pipe again when flushing stdout at exit: point it nowhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a filter the pipe stopped
    finally:
        # The process ends now and everything goes with it: frozen, what is left skips the
        # full collection Python's teardown runs (~20 ms after a migrate of 300 files).
        gc.freeze()


def _run(argv: list[str]) -> int:
    if argv[:1] == ["lint"]:
        # A lint process is short, and what it builds (modules, parse trees, findings) holds
        # no garbage cycles: the cyclic collector would only rescan it (3-5 % of a run).
        gc.disable()
        from pgsteady.lint import quick  # noqa: PLC0415 -- os, sys, zlib only

        code = quick.replay(argv[1:])
        if code is not None:
            return code
        quick.arm(argv[1:])
    return _cli(argv)


def _cli(argv: list[str]) -> int:
    """:func:`pgsteady.cli.main`; psycopg without a libpq to load (``pgsteady[cli]`` on a
    machine without PostgreSQL's client library) is one line naming ``pgsteady[binary]``,
    exit 2, not the ImportError's 45 lines from whichever verb imported psycopg first."""
    from pgsteady import cli  # noqa: PLC0415 -- after the warm path

    try:
        return cli.main()
    except ImportError as exc:
        from pgsteady._extras import libpq_missing  # noqa: PLC0415 -- on this error only

        missing = libpq_missing(exc, f"pgsteady {argv[0]}" if argv[:1] and
                                not argv[0].startswith("-") else "pgsteady")
        if missing is None:
            raise
        return cli._fail(missing.exit_code, f"pgsteady: error: {missing}",
                         type(missing).__name__, as_json=cli._wants_json(argv))
