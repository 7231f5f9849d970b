"""ADD CONSTRAINT (FOREIGN KEY or CHECK) without NOT VALID checks every row under a lock.

Adding a CHECK constraint scans the whole table while holding ACCESS EXCLUSIVE (no reads, no
writes); a FOREIGN KEY holds SHARE ROW EXCLUSIVE on both tables (no writes) while it checks
every row. Add it ``NOT VALID`` (new rows are checked at once, the lock is brief), then
``VALIDATE CONSTRAINT`` in a later step: validation takes only SHARE UPDATE EXCLUSIVE, so
reads and writes go on. Constraints on a table created in the same file are fine.

``ADD COLUMN c bigint REFERENCES p`` (what Rails' ``add_reference`` writes) is the same
full check in disguise, and a column constraint cannot be NOT VALID: add the column, then
the foreign key as a table constraint ``NOT VALID``, then validate it.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified, table_ref

ID = "constraint-missing-not-valid"
MESSAGE = "adding a constraint without NOT VALID checks every row while holding a lock"
HELP = ("Add it NOT VALID, then validate in a separate step (or migration): "
        "ALTER TABLE t ADD CONSTRAINT c CHECK (...) NOT VALID; "
        "ALTER TABLE t VALIDATE CONSTRAINT c;")
MIN_PG_VERSION = None
COMMANDS = ("AT_AddConstraint", "AT_AddColumn")
SIZE_AWARE = True
_KINDS = {"CONSTR_FOREIGN": "FOREIGN KEY", "CONSTR_CHECK": "CHECK"}


def check(subtype: str, cmd: Node, ctx: Context) -> Iterator[Hit]:
    relation = ctx.relation
    if subtype == "AT_AddColumn":
        yield from _column_references(cmd, relation)
        return
    constraint = (cmd.get("def") or {}).get("Constraint", {})
    what = _KINDS.get(constraint.get("contype", ""))
    if what is None or constraint.get("skip_validation"):
        return
    name = constraint.get("conname")
    label = f"{what} {name}" if name else what
    yield Hit(f"{label} on {qualified(relation)}", constraint.get("location"),
              table_ref(relation))


def _column_references(cmd: Node, relation: Node | None) -> Iterator[Hit]:
    column = (cmd.get("def") or {}).get("ColumnDef", {})
    for item in column.get("constraints") or ():
        constraint = item.get("Constraint", {})
        if constraint.get("contype") == "CONSTR_FOREIGN":
            yield Hit(f"FOREIGN KEY on new column {column.get('colname', '?')} of "
                      f"{qualified(relation or {})} (a column REFERENCES cannot be NOT VALID)",
                      constraint.get("location"), table_ref(relation))
