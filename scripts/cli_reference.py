"""Write docs/reference/cli.md: every verb's --help, from the parser itself.

    python scripts/cli_reference.py [OUT]     (default docs/reference/cli.md)

tests/docs/test_site.py checks the committed page is what this writes today.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

WIDTH = "100"  # the help's width, whatever the terminal: the page is the same everywhere


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) \
        -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command, parents first, with its parser."""
    yield path, parser
    for action in parser._actions:  # argparse keeps its sub-commands in a private type
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from leaves(sub, (*path, name))


def page() -> str:
    os.environ["COLUMNS"] = WIDTH
    from pgsteady.cli import build_parser  # noqa: PLC0415 -- after COLUMNS is set

    parts = ["# Command line", "",
             "Generated from the parser (`python scripts/cli_reference.py`): what "
             "`pgsteady VERB --help` prints. Every verb needs `pip install 'pgsteady[cli]'`; "
             "exit codes are on [their own page](exit-codes.md), durations are written "
             "`50ms`, `1.5s`, `2m` or `1h`, and DSNs come from `--dsn` or `PGSTEADY_DSN` (or "
             "libpq's `PG*` variables).", ""]
    for path, parser in leaves(build_parser()):
        title = " ".join(("pgsteady", *path))
        parts += [f"{'#' * min(2 + len(path) // 2, 4) if path else '##'} `{title}`", "",
                  "```text", parser.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/reference/cli.md")
    out.write_text(page())
