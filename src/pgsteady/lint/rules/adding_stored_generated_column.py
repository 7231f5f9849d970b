"""ADD COLUMN ... GENERATED ALWAYS AS (...) STORED rewrites the table under ACCESS EXCLUSIVE.

A stored generated column is computed and written for every existing row while the table is
locked against reads and writes. Add a plain column, fill it with a trigger for new rows and
a batched backfill for old ones; or, on PostgreSQL 18+, a ``VIRTUAL`` generated column,
which is computed on read and added without a rewrite.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady import _majors
from pgsteady.lint.base import (
    Context,
    Hit,
    Node,
    column_defs,
    constraints,
    qualified,
    table_ref,
)

ID = "adding-stored-generated-column"
MESSAGE = "adding a STORED generated column rewrites the table under ACCESS EXCLUSIVE"
HELP = ("Add a plain column, fill new rows with a trigger and old rows in batches; on "
        "PostgreSQL 18+: ALTER TABLE t ADD COLUMN c int GENERATED ALWAYS AS (a * 2) VIRTUAL;")
MIN_PG_VERSION = _majors.STORED_GENERATED_COLUMNS
STATEMENTS = ("AlterTableStmt.AT_AddColumn",)
SIZE_AWARE = True


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    relation = stmt.get("relation") or {}
    if ctx.is_new_table(relation):
        return
    for column in column_defs(kind, stmt):
        for constraint in constraints(column):
            if constraint.get("contype") == "CONSTR_GENERATED" and \
                    constraint.get("generated_kind", "s") == "s":
                yield Hit(f"{qualified(relation)}.{column.get('colname', '')}",
                          constraint.get("location"), table_ref(relation))
