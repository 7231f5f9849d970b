"""ADD COLUMN with a volatile default (or serial / identity) rewrites the whole table.

Since PostgreSQL 11, ``ADD COLUMN ... DEFAULT <constant or stable expression>`` only records
the default in the catalog. A *volatile* default (``random()``, ``gen_random_uuid()``,
``clock_timestamp()``, ``nextval()``, so also ``serial`` and ``GENERATED ... AS IDENTITY``)
must be computed per row: the table is rewritten under ACCESS EXCLUSIVE. Before 11 any
default rewrites. Add the column without a default (or with a constant one), set the
default for new rows separately, and backfill old rows in batches outside the migration.
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
    function_names,
    qualified,
    table_ref,
    type_name,
)

ID = "adding-volatile-default"
MESSAGE = "ADD COLUMN with a volatile default rewrites the table under ACCESS EXCLUSIVE"
HELP = ("Add the column without it, set the default for new rows, backfill in batches "
        "outside the migration: ALTER TABLE t ADD COLUMN c uuid; "
        "ALTER TABLE t ALTER COLUMN c SET DEFAULT gen_random_uuid();  "
        "then UPDATE t SET c = gen_random_uuid() WHERE id BETWEEN ... (in batches)")
MIN_PG_VERSION = None
STATEMENTS = ("AlterTableStmt.AT_AddColumn",)
SIZE_AWARE = True
VOLATILE = frozenset({
    "random", "random_normal", "gen_random_uuid", "uuid_generate_v1", "uuid_generate_v1mc",
    "uuid_generate_v4", "uuidv4", "uuidv7", "clock_timestamp", "timeofday", "nextval",
    "setseed", "txid_current", "pg_current_xact_id",
})
SERIALS = frozenset({"serial", "serial2", "serial4", "serial8", "smallserial", "bigserial"})


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    relation = stmt.get("relation") or {}
    if ctx.is_new_table(relation):
        return
    for column in column_defs(kind, stmt):
        name = f"{qualified(relation)}.{column.get('colname', '')}"
        if type_name(column.get("typeName")) in SERIALS:
            yield Hit(f"{name} is serial", column.get("location"), table_ref(relation))
            continue
        for constraint in constraints(column):
            contype = constraint.get("contype")
            if contype == "CONSTR_IDENTITY":
                yield Hit(f"{name} is an identity column", constraint.get("location"),
                          table_ref(relation))
            elif contype == "CONSTR_DEFAULT":
                volatile = _volatile_call(constraint.get("raw_expr"))
                if volatile is not None:
                    yield Hit(f"{name} DEFAULT {volatile}()", constraint.get("location"),
                              table_ref(relation))
                elif not _majors.supports(ctx.pg_version, _majors.FAST_COLUMN_DEFAULT):
                    yield Hit(f"{name}: before PostgreSQL 11 any default rewrites",
                              constraint.get("location"), table_ref(relation))


def _volatile_call(expr: Node | None) -> str | None:
    return next((name for name in function_names(expr) if name in VOLATILE), None)
