"""A backfill after an ALTER TABLE in the same transaction runs under ACCESS EXCLUSIVE.

``ALTER TABLE users ADD COLUMN plan text`` needs ACCESS EXCLUSIVE only for a moment, but a
transaction keeps every lock until it ends. An ``UPDATE users SET plan = ...`` (or DELETE)
later in the same transaction therefore runs with the table closed to every reader and
writer, for as long as the backfill takes: seconds become an outage. The same holds when the
backfill changes *another* table (``ALTER TABLE orgs ...; UPDATE users ...``): ``orgs`` stays
closed until the UPDATE of ``users`` ends and the transaction commits (an ``ALTER TABLE ...
RENAME`` takes the same lock). ``pgsteady migrate``
runs each file in one transaction, so this covers the whole file; a table created in the same
transaction (nobody else can use it yet) and a file run outside a transaction are not
reported. squawk does not look at data changes. Commit the schema change first and backfill
in batches afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified, table_ref

ID = "backfill-under-lock"
MESSAGE = "UPDATE/DELETE after an ALTER TABLE in the same transaction runs under ACCESS EXCLUSIVE"
HELP = ("Commit the ALTER first (end the migration there); backfill in batches afterwards, "
        "outside the schema migration: UPDATE t SET c = ... WHERE id >= $1 AND id < $1 + 5000;")
MIN_PG_VERSION = None
STATEMENTS = ("UpdateStmt", "DeleteStmt")
SIZE_AWARE = True
_NAMED = 3  # locked tables named in one finding


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    relation = stmt.get("relation")
    if relation is None or not ctx.in_transaction or not ctx.altered_in_transaction:
        return
    key = ctx.key(relation)
    if key in ctx.altered_in_transaction:
        yield Hit(f"{qualified(relation)} is locked by the earlier ALTER TABLE",
                  table=table_ref(relation))
    elif not ctx.is_new_table(relation):
        locked = sorted(".".join(k) if k[0] != "public" else k[1]
                        for k in ctx.altered_in_transaction)
        named = ", ".join(locked[:_NAMED]) + (f" and {len(locked) - _NAMED} more"
                                              if len(locked) > _NAMED else "")
        yield Hit(f"the earlier ALTER TABLE keeps ACCESS EXCLUSIVE on {named} while "
                  f"{qualified(relation)} is changed, until the transaction commits",
                  table=table_ref(relation))
