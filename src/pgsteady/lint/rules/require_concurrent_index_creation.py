"""CREATE INDEX without CONCURRENTLY blocks every write to the table while the index builds.

A plain ``CREATE INDEX`` takes a SHARE lock: reads go on, but INSERT, UPDATE and DELETE wait
for the whole build, which on a large table is minutes. ``CREATE INDEX CONCURRENTLY`` takes
SHARE UPDATE EXCLUSIVE and lets writes through; it cannot run inside a transaction block, and
a failed build leaves an INVALID index to drop and retry. Indexes on a table created earlier
in the same file are fine: nobody else can be using that table yet.

A partitioned table cannot be indexed CONCURRENTLY; ``CREATE INDEX ... ON ONLY`` it builds
nothing (an invalid index on the parent alone, at once) and is fine: then build the index
CONCURRENTLY on each partition and ``ALTER INDEX ... ATTACH PARTITION`` each one. ``ON ONLY``
a table known not to be partitioned builds the whole index and is reported.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified, table_ref

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
    table = ctx.schema.table(relation)
    if not relation.get("inh") and (table is None or table.partitioned):
        return  # ON ONLY a partitioned table: nothing is built
    if table is not None and table.partitioned:
        yield Hit(f"on {qualified(relation)}, a partitioned table, which CONCURRENTLY cannot "
                  f"index: create it ON ONLY the table, CONCURRENTLY on each partition, then "
                  f"ALTER INDEX ... ATTACH PARTITION each", table=table_ref(relation))
        return
    yield Hit(f"on {qualified(relation)}", table=table_ref(relation))
