"""ADD UNIQUE or ADD PRIMARY KEY builds its index under an ACCESS EXCLUSIVE lock.

``ALTER TABLE ... ADD PRIMARY KEY (id)`` or ``ADD UNIQUE (col)`` builds a unique index while
holding ACCESS EXCLUSIVE: no reads, no writes until it is done. ``NOT VALID`` does not apply
to these constraints (PostgreSQL refuses it); the safe path is to build the unique index
concurrently first and then attach it, which only needs a brief lock:
``ADD CONSTRAINT ... PRIMARY KEY USING INDEX``. A primary key also needs its columns NOT
NULL; set that first the safe way (see ``set-not-null-without-check``).
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified, table_ref

ID = "require-unique-using-index"
MESSAGE = "adding a UNIQUE or PRIMARY KEY constraint builds its index under ACCESS EXCLUSIVE"
HELP = ("Build the index concurrently, then attach it: "
        "CREATE UNIQUE INDEX CONCURRENTLY t_col_key ON t (col); "
        "ALTER TABLE t ADD CONSTRAINT t_col_key UNIQUE USING INDEX t_col_key;  "
        "(PRIMARY KEY USING INDEX likewise)")
MIN_PG_VERSION = None
COMMANDS = ("AT_AddConstraint", "AT_AddColumn")
SIZE_AWARE = True
_KINDS = {"CONSTR_UNIQUE": "UNIQUE", "CONSTR_PRIMARY": "PRIMARY KEY"}


def check(subtype: str, cmd: Node, ctx: Context) -> Iterator[Hit]:
    definition = cmd.get("def") or {}
    if subtype == "AT_AddConstraint":
        constraints = [definition.get("Constraint", {})]
    else:  # ADD COLUMN id bigint PRIMARY KEY
        column = definition.get("ColumnDef", {})
        constraints = [c["Constraint"] for c in column.get("constraints") or ()
                       if "Constraint" in c]
    for constraint in constraints:
        what = _KINDS.get(constraint.get("contype", ""))
        if what is not None and not constraint.get("indexname"):
            yield Hit(f"{what} on {qualified(ctx.relation)}", constraint.get("location"),
                      table_ref(ctx.relation))
