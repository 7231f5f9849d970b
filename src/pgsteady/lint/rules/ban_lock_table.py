"""LOCK TABLE in a migration holds its lock until the transaction ends; squawk misses it.

An explicit ``LOCK TABLE t`` (ACCESS EXCLUSIVE unless a mode is given) queues behind every
query on the table, makes every later query queue behind it, and keeps the lock for the
rest of the transaction, including whatever slow statements follow. The statements that
need a lock take the weakest one they need, for as short as they can; explicit locks are
almost never needed in a migration. If one truly is, keep it short and bounded by
``SET lock_timeout``.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified

ID = "ban-lock-table"
MESSAGE = "LOCK TABLE holds a table lock until the transaction ends"
HELP = ("Remove it and let each statement take the lock it needs; if you must keep it: "
        "SET lock_timeout = '5s'; LOCK TABLE t IN SHARE ROW EXCLUSIVE MODE;  "
        "and keep the transaction short")
MIN_PG_VERSION = None
STATEMENTS = ("LockStmt",)
MODES = ("", "ACCESS SHARE", "ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE", "SHARE",
         "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE")


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    mode = int(stmt.get("mode", 8))
    tables = ", ".join(qualified(r.get("RangeVar", {})) for r in stmt.get("relations") or ())
    name = MODES[mode] if 0 < mode < len(MODES) else "ACCESS EXCLUSIVE"
    yield Hit(f"{name} on {tables}")
