r"""psql meta-commands (``\set``, ``\connect``, ``\i``) are not SQL: they were skipped.

A file written for ``psql -f`` may carry backslash commands; no migration runner but psql
understands them, and ``pgsteady migrate`` would send them to the server, which rejects
them. The linter blanks each such line out and lints the SQL around it, and notes what it
skipped, so a ``\connect`` to another database (whose statements are then linted as if they
ran here) does not pass unseen. Keep psql-only files out of the runner's folder, or run them
with psql. Reported by the engine, as a warning.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node

ID = "psql-meta-command"
MESSAGE = "psql meta-command skipped (only psql understands it)"
HELP = ("Run this file with psql, or remove the backslash commands: a migration runner sends "
        "them to the server, which rejects them (SET x = ... for \\set)")
MIN_PG_VERSION = None
STATEMENTS: tuple[str, ...] = ()
SEVERITY = "warning"


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    return iter(())
