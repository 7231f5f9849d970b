"""DROP INDEX without CONCURRENTLY takes ACCESS EXCLUSIVE on the index's table.

The drop itself is quick, but to get its lock it queues behind every running query on the
table, and every later query queues behind it: one long SELECT turns it into an outage.
``DROP INDEX CONCURRENTLY`` waits for conflicting transactions without blocking new ones; it
cannot run inside a transaction block and drops one index per statement.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, strings

ID = "require-concurrent-index-deletion"
MESSAGE = "DROP INDEX without CONCURRENTLY locks the table against reads and writes"
HELP = ("Drop it without blocking the table, outside a transaction block: "
        "DROP INDEX CONCURRENTLY IF EXISTS idx;")
MIN_PG_VERSION = None
STATEMENTS = ("DropStmt",)


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    if stmt.get("removeType") != "OBJECT_INDEX" or stmt.get("concurrent"):
        return
    names = [".".join(strings(o.get("List", {}).get("items"))) for o in stmt.get("objects") or ()]
    yield Hit(", ".join(n for n in names if n))
