"""Dropping a column breaks every running instance of the application that still reads it.

During a deploy old and new code run side by side; old code that selects, inserts or maps
the column fails the moment it is gone (ORMs often select every column by name). Stop using
the column in the code first (and tell the ORM to ignore it), deploy, and only then drop it
in a later migration.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified

ID = "ban-drop-column"
MESSAGE = "dropping a column breaks code that still reads or writes it"
HELP = ("Remove every use of the column from the code and deploy that first; then, in a "
        "later migration: ALTER TABLE t DROP COLUMN IF EXISTS c;  "
        "(ignore this rule on that statement with the reason)")
MIN_PG_VERSION = None
COMMANDS = ("AT_DropColumn",)


def check(subtype: str, cmd: Node, ctx: Context) -> Iterator[Hit]:
    yield Hit(f"{qualified(ctx.relation)}.{cmd.get('name', '')}", command=cmd)
