"""CREATE INDEX without CONCURRENTLY blocks every write to the table while the index builds.

A plain ``CREATE INDEX`` takes a SHARE lock: reads go on, but INSERT, UPDATE and DELETE wait
for the whole build, which on a large table is minutes. ``CREATE INDEX CONCURRENTLY`` takes
SHARE UPDATE EXCLUSIVE and lets writes through; it cannot run inside a transaction block, and
a failed build leaves an INVALID index to drop and retry. Indexes on a table created earlier
in the same file are fine: nobody else can be using that table yet.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.migrate.lint.base import Context, Hit, Node, qualified, table_ref

ID = "require-concurrent-index-creation"
MESSAGE = "CREATE INDEX without CONCURRENTLY blocks writes to the table until the build ends"
HELP = ("Build it without blocking writes, outside a transaction block: "
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS idx ON t (col);")
MIN_PG_VERSION = None
STATEMENTS = ("IndexStmt",)
SIZE_AWARE = True


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    relation = stmt.get("relation")
    if stmt.get("concurrent") or relation is None or ctx.is_new_table(relation):
        return
    yield Hit(f"on {qualified(relation)}", table=table_ref(relation))
