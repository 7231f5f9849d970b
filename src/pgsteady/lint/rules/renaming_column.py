"""Renaming a column breaks every running instance of the application that uses the old name.

Old and new code run side by side during a deploy; whichever uses the other name fails.
Add the new column, write to both, backfill, move reads, then drop the old one; or put a
view with the old name in front of the table while the code moves over.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified

ID = "renaming-column"
MESSAGE = "renaming a column breaks code that uses the old name"
HELP = ("Add the new column and move the code over in steps: "
        "ALTER TABLE t ADD COLUMN new_name text;  (write both, backfill, read new, "
        "drop old in a later migration)")
MIN_PG_VERSION = None
STATEMENTS = ("RenameStmt",)


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    relation = stmt.get("relation")
    if stmt.get("renameType") != "OBJECT_COLUMN" or relation is None:
        return
    if ctx.is_new_table(relation):
        return
    yield Hit(f"{qualified(relation)}.{stmt.get('subname', '')} -> {stmt.get('newname', '')}")
