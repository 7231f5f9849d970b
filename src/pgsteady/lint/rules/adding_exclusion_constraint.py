"""ADD CONSTRAINT ... EXCLUDE checks every row under ACCESS EXCLUSIVE; it cannot be NOT VALID.

An exclusion constraint builds its index and checks all existing rows while holding ACCESS
EXCLUSIVE (no reads, no writes), and unlike CHECK or FOREIGN KEY it has no ``NOT VALID``
form. On a table of any size, add it while the table is new or small, or enforce the rule
another way (a unique index on a derived key built concurrently, or a trigger).
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified, table_ref

ID = "adding-exclusion-constraint"
MESSAGE = "adding an EXCLUDE constraint checks every row under ACCESS EXCLUSIVE"
HELP = ("Add it when the table is created (CREATE TABLE t (..., EXCLUDE USING gist "
        "(room WITH =, during WITH &&)));  on a live table, plan a maintenance window")
MIN_PG_VERSION = None
COMMANDS = ("AT_AddConstraint",)
SIZE_AWARE = True


def check(subtype: str, cmd: Node, ctx: Context) -> Iterator[Hit]:
    constraint = (cmd.get("def") or {}).get("Constraint", {})
    if constraint.get("contype") == "CONSTR_EXCLUSION":
        yield Hit(f"on {qualified(ctx.relation)}", constraint.get("location"),
                  table_ref(ctx.relation))
