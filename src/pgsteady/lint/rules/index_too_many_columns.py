"""An index on more than three columns is rarely used as a whole and costs on every write.

A B-tree index is only used from its leading columns; a wide index is large, slows every
INSERT and UPDATE, and usually serves one query that a narrower index (or an ``INCLUDE``
list, which is not part of the key) would serve as well. strong_migrations reports it too.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node

ID = "index-too-many-columns"
MESSAGE = "index on more than 3 columns"
HELP = ("Index the leading, selective columns and carry the rest as payload: "
        "CREATE INDEX CONCURRENTLY idx ON t (a, b) INCLUDE (c, d);")
MIN_PG_VERSION = None
STATEMENTS = ("IndexStmt",)
LIMIT = 3


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    columns = len(stmt.get("indexParams") or ())
    if columns > LIMIT and stmt.get("accessMethod", "btree") == "btree":
        yield Hit(f"{columns} key columns")
