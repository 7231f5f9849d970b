"""ADD COLUMN with a CHECK constraint scans the whole table under ACCESS EXCLUSIVE.

Adding a column is instant only while nothing has to look at the existing rows. A ``CHECK``
on the new column (``ADD COLUMN qty int CHECK (qty > 0)``) is validated against every row,
while ``ALTER TABLE`` holds ACCESS EXCLUSIVE: no reads, no writes, for the whole scan. A
column constraint cannot be ``NOT VALID``. Add the column without it, then add the check as
a table constraint ``NOT VALID`` and validate it in a later step (SHARE UPDATE EXCLUSIVE).
squawk does not report it. A table created in the same change is fine.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified, table_ref

ID = "adding-column-with-check"
MESSAGE = "ADD COLUMN with a CHECK validates every row under ACCESS EXCLUSIVE"
HELP = ("Add the column bare, then the check NOT VALID, and validate later: "
        "ALTER TABLE t ADD COLUMN qty int; ALTER TABLE t ADD CONSTRAINT t_qty_check "
        "CHECK (qty > 0) NOT VALID; ALTER TABLE t VALIDATE CONSTRAINT t_qty_check;")
MIN_PG_VERSION = None
COMMANDS = ("AT_AddColumn",)
SIZE_AWARE = True


def check(subtype: str, cmd: Node, ctx: Context) -> Iterator[Hit]:
    relation = ctx.relation
    column = (cmd.get("def") or {}).get("ColumnDef", {})
    for item in column.get("constraints") or ():
        constraint = item.get("Constraint", {})
        if constraint.get("contype") == "CONSTR_CHECK":
            yield Hit(f"{qualified(relation)}.{column.get('colname', '?')}",
                      constraint.get("location"), table_ref(relation))
