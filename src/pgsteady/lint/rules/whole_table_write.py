"""UPDATE or DELETE of a whole table in a migration: a long backfill holding its locks.

An ``UPDATE`` or ``DELETE`` without ``WHERE`` touches every row in one transaction: on a
large table it runs for minutes, holds row locks on everything it touched (blocking
concurrent writes to those rows), bloats the table, and keeps every lock the migration took
before it (an ``ALTER TABLE`` earlier in the file keeps its ACCESS EXCLUSIVE until the end).
squawk does not look at data changes. Backfill in batches of a few thousand rows, each in
its own transaction, outside the schema migration.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified, table_ref

ID = "whole-table-write"
MESSAGE = "UPDATE/DELETE without WHERE rewrites every row in one long transaction"
HELP = ("Backfill in batches outside the schema migration, one short transaction each: "
        "UPDATE t SET c = ... WHERE id >= $1 AND id < $1 + 5000;  (repeat until done)")
MIN_PG_VERSION = None
STATEMENTS = ("UpdateStmt", "DeleteStmt")
SIZE_AWARE = True


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    relation = stmt.get("relation")
    if relation is None or stmt.get("whereClause") is not None or ctx.is_new_table(relation):
        return
    verb = "UPDATE" if kind == "UpdateStmt" else "DELETE"
    yield Hit(f"{verb} of all of {qualified(relation)}", table=table_ref(relation))
