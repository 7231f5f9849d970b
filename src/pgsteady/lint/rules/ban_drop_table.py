"""Dropping a table breaks every running instance of the application that still uses it.

Old code keeps querying the table until it is replaced; once the table is gone those
queries fail, and the data is gone too (no rollback of the deploy brings it back). Remove
every use first, deploy, keep a backup or rename it aside for a while, then drop it in a
later migration. Tables created earlier in the same file are not reported.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, strings

ID = "ban-drop-table"
MESSAGE = "dropping a table breaks code that still uses it and loses its data"
HELP = ("Remove every use from the code and deploy that first; then, in a later migration: "
        "DROP TABLE IF EXISTS t;  (ignore this rule on that statement with the reason)")
MIN_PG_VERSION = None
STATEMENTS = ("DropStmt",)


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    if stmt.get("removeType") != "OBJECT_TABLE":
        return
    for obj in stmt.get("objects") or ():
        names = strings(obj.get("List", {}).get("items"))
        if names and not ctx.schema.is_new_key(ctx.schema.name_key(names, ctx.schema.tables)):
            yield Hit(".".join(names))
