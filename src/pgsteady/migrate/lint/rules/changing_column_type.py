"""ALTER COLUMN ... TYPE rewrites the table (and its indexes) under ACCESS EXCLUSIVE.

Most type changes rewrite every row and rebuild every index on the table while holding ACCESS
EXCLUSIVE: no reads, no writes, for as long as that takes. A few do not, because the old
values are already valid in the new type ("binary coercible"): ``varchar(n)`` -> ``text``,
``varchar(n)`` -> ``varchar`` (unbounded) and widening ``varchar(n)`` -> ``varchar(m)``
with m >= n. This rule does not report changes to ``text`` or ``varchar`` without ``USING``
(squawk reports them, wrongly). It cannot see the column's current type, so it assumes a
``varchar(m)`` target widens; narrowing also scans every row. Any ``USING`` rewrites.
For everything else: add a new column, backfill it in batches, switch reads and writes,
then drop the old one.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.migrate.lint.base import (
    Context,
    Hit,
    Node,
    alter_commands,
    qualified,
    table_ref,
    type_name,
)

ID = "changing-column-type"
MESSAGE = "changing a column's type rewrites the table and its indexes under ACCESS EXCLUSIVE"
HELP = ("Add a new column, backfill it in batches, move reads and writes, drop the old one: "
        "ALTER TABLE t ADD COLUMN c_new bigint; UPDATE t SET c_new = c WHERE id BETWEEN ... ; "
        "(changes to text, or widening a varchar, need none of this)")
MIN_PG_VERSION = None
STATEMENTS = ("AlterTableStmt.AT_AlterColumnType",)
SIZE_AWARE = True
# Targets that are binary coercible from varchar/text: no rewrite, no index rebuild.
NO_REWRITE_TARGETS = frozenset({"text", "varchar"})


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    relation = stmt.get("relation") or {}
    if ctx.is_new_table(relation):
        return
    for subtype, cmd in alter_commands(stmt):
        if subtype != "AT_AlterColumnType":
            continue
        column = (cmd.get("def") or {}).get("ColumnDef", {})
        target = type_name(column.get("typeName"))
        using = column.get("raw_default") is not None
        if target in NO_REWRITE_TARGETS and not using:
            continue
        detail = f"{qualified(relation)}.{cmd.get('name', '')} to {target}"
        yield Hit(detail + (" USING ..." if using else ""),
                  (column.get("typeName") or {}).get("location"), table_ref(relation))
