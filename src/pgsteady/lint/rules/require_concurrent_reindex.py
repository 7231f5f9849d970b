"""REINDEX without CONCURRENTLY blocks writes to the table (and reads of the index) throughout.

A plain ``REINDEX`` locks the table against writes and the index against every query that
would use it, for as long as the rebuild takes. Since PostgreSQL 12, ``REINDEX ...
CONCURRENTLY`` builds a new index beside the old one and swaps them with only brief locks;
it cannot run inside a transaction block. Before 12 the lock is the same and the fix is a
twin index built with ``CREATE INDEX CONCURRENTLY``, then the old one dropped concurrently.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady import _majors
from pgsteady.lint.base import Context, Hit, Node, option_names, qualified, table_ref

ID = "require-concurrent-reindex"
MESSAGE = "REINDEX without CONCURRENTLY blocks writes for the whole rebuild"
HELP = ("Rebuild beside the old index, outside a transaction block: "
        "REINDEX INDEX CONCURRENTLY idx;  (or REINDEX TABLE CONCURRENTLY t;)")
HELP_BEFORE = ("This major has no REINDEX CONCURRENTLY (PostgreSQL 12 added it): build a "
               "twin outside a transaction block and swap: CREATE INDEX CONCURRENTLY idx_new "
               "ON t (...); DROP INDEX CONCURRENTLY idx; ALTER INDEX idx_new RENAME TO idx;")
MIN_PG_VERSION = None
FEATURE = _majors.REINDEX_CONCURRENTLY
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
