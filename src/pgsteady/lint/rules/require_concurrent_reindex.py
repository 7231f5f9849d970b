"""REINDEX without CONCURRENTLY blocks writes to the table (and reads of the index) throughout.

A plain ``REINDEX`` locks the table against writes and the index against every query that
would use it, for as long as the rebuild takes. Since PostgreSQL 12, ``REINDEX ...
CONCURRENTLY`` builds a new index beside the old one and swaps them with only brief locks;
it cannot run inside a transaction block.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, option_names, qualified, table_ref

ID = "require-concurrent-reindex"
MESSAGE = "REINDEX without CONCURRENTLY blocks writes for the whole rebuild"
HELP = ("Rebuild beside the old index, outside a transaction block: "
        "REINDEX INDEX CONCURRENTLY idx;  (or REINDEX TABLE CONCURRENTLY t;)")
MIN_PG_VERSION = 12
STATEMENTS = ("ReindexStmt",)
SIZE_AWARE = True


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    if "concurrently" in option_names(stmt.get("params")):
        return
    relation = stmt.get("relation")
    if relation is None:
        yield Hit(f"of a whole {str(stmt.get('kind', '')).rsplit('_', 1)[-1].lower()}")
    else:
        yield Hit(f"of {qualified(relation)}", table=table_ref(relation))
