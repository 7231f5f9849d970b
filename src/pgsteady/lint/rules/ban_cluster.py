"""CLUSTER rewrites the table in index order under ACCESS EXCLUSIVE.

``CLUSTER`` copies the whole table and rebuilds its indexes while holding ACCESS EXCLUSIVE:
no reads, no writes until it is done, and it needs disk for a second copy. Reorder online
with pg_repack (``--order-by``) instead, outside the migration.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified, table_ref

ID = "ban-cluster"
MESSAGE = "CLUSTER rewrites the table and blocks all reads and writes"
HELP = "Reorder online outside the migration: pg_repack --table t --order-by col"
MIN_PG_VERSION = None
STATEMENTS = ("ClusterStmt",)
SIZE_AWARE = True


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    relation = stmt.get("relation")
    if relation is None:
        yield Hit("of every previously clustered table")
    elif not ctx.is_new_table(relation):
        yield Hit(f"of {qualified(relation)}", table=table_ref(relation))
