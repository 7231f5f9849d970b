"""Renaming a table breaks every running instance of the application that uses the old name.

Old code keeps using the old name until it is replaced. Create the new table (or rename and
leave an updatable view with the old name: ``CREATE VIEW old AS SELECT * FROM new``) and
move the code over before removing the old name.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified

ID = "renaming-table"
MESSAGE = "renaming a table breaks code that uses the old name"
HELP = ("Rename and keep the old name working until the code has moved: "
        "ALTER TABLE old RENAME TO new; CREATE VIEW old AS SELECT * FROM new;")
MIN_PG_VERSION = None
STATEMENTS = ("RenameStmt",)


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    relation = stmt.get("relation")
    if stmt.get("renameType") != "OBJECT_TABLE" or relation is None:
        return
    if ctx.is_new_table(relation):
        return
    yield Hit(f"{qualified(relation)} -> {stmt.get('newname', '')}")
