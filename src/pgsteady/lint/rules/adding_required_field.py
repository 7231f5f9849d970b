"""ADD COLUMN ... NOT NULL without a DEFAULT fails on any table that has rows.

Existing rows would get NULL in the new column, so PostgreSQL refuses the statement as soon
as the table is not empty: the migration passes on an empty development database and fails
in production. Give the column a constant default (instant since PostgreSQL 11), or add it
nullable, backfill, and set NOT NULL the safe way. Not reported on a table created in the same
change, nor on one the same transaction emptied first (``TRUNCATE t``, or ``DELETE FROM t``
without WHERE, with no INSERT or other writing statement between).
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import (
    Context,
    Hit,
    Node,
    column_defs,
    constraints,
    qualified,
    type_name,
)

ID = "adding-required-field"
MESSAGE = "ADD COLUMN NOT NULL without a DEFAULT fails on a table that has rows"
HELP = ("Give it a constant default: ALTER TABLE t ADD COLUMN c int NOT NULL DEFAULT 0;  "
        "or add it nullable, backfill in batches, then add NOT NULL via a validated CHECK")
MIN_PG_VERSION = None
STATEMENTS = ("AlterTableStmt.AT_AddColumn",)
_FILLED = frozenset({"CONSTR_DEFAULT", "CONSTR_IDENTITY", "CONSTR_GENERATED"})


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    relation = stmt.get("relation") or {}
    if ctx.is_new_table(relation) or ctx.key(relation) in ctx.emptied_in_transaction:
        return
    for column in column_defs(kind, stmt):
        kinds = {c.get("contype") for c in constraints(column)}
        if kinds & {"CONSTR_NOTNULL", "CONSTR_PRIMARY"} and not kinds & _FILLED:
            if type_name(column.get("typeName")).endswith("serial") or \
                    type_name(column.get("typeName")) in {"serial2", "serial4", "serial8"}:
                continue  # serial fills itself (and is flagged by adding-volatile-default)
            yield Hit(f"{qualified(relation)}.{column.get('colname', '')}",
                      column.get("location"))
