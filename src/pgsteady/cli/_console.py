"""The rich consoles the verbs print through.

rich answers a reader that stopped early (``pgsteady sim pool-drain | head -1``) by exiting with
status 1, as if the run had failed; a Unix filter ends with 141 (128 + SIGPIPE) and says
nothing. These consoles raise ``BrokenPipeError`` instead, which the entry point
(:mod:`pgsteady._main`) turns into that quiet 141.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console

#: The width of tables written to a pipe or a file: wide enough that no table wraps.
PIPED_WIDTH = 200


class _Console(Console):
    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more to write: the reader is gone
        raise BrokenPipeError


def console(*, stderr: bool = False, **options: Any) -> Console:
    """A console on stdout (or stderr): the terminal's width on a terminal, else
    :data:`PIPED_WIDTH`, unless ``options`` say otherwise."""
    stream = sys.stderr if stderr else sys.stdout
    options.setdefault("width", None if stream.isatty() else PIPED_WIDTH)
    return _Console(stderr=stderr, **options)
