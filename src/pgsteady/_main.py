"""The ``pgsteady`` command's entry point.

A warm ``pgsteady lint`` (nothing changed since the last run with the same arguments) is
answered from :mod:`pgsteady.migrate.lint.quick` before the command line, argparse or the
configuration load; everything else goes to :func:`pgsteady.cli.main`.
"""

from __future__ import annotations

import gc
import sys


def main() -> int:
    """Run ``pgsteady`` with the process's arguments; the exit code."""
    argv = sys.argv[1:]
    if argv[:1] == ["lint"]:
        # A lint process is short, and what it builds (modules, parse trees, findings) holds
        # no garbage cycles: the cyclic collector would only rescan it (3-5 % of a run).
        gc.disable()
        from pgsteady.migrate.lint import quick  # noqa: PLC0415 -- os, sys, marshal only

        code = quick.replay(argv[1:])
        if code is not None:
            return code
        quick.arm(argv[1:])
    from pgsteady.cli import main as cli_main  # noqa: PLC0415 -- after the warm path

    return cli_main()
