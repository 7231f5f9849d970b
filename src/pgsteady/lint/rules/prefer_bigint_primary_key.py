"""An ``int``/``serial`` primary key runs out at 2 147 483 647 rows (ids, really).

Ids are never reused, so a busy table exhausts a 32-bit key sooner than its row count
suggests, and widening it later rewrites the table and every referencing table under
ACCESS EXCLUSIVE. Start with ``bigint`` (preferably ``GENERATED ALWAYS AS IDENTITY``): the
extra 4 bytes per row are cheap insurance.

In a primary key of several columns, a 32-bit member only runs out if it generates values
(``serial``, an identity, a ``nextval`` default): ``(shard_id int, task_id bigint)`` names
a shard, not a row, so it is left alone.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import (
    Context,
    Hit,
    Node,
    column_defs,
    constraints,
    function_names,
    strings,
    type_name,
)

ID = "prefer-bigint-primary-key"
MESSAGE = "32-bit primary key: it can run out of ids"
HELP = "Use a 64-bit identity: id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
MIN_PG_VERSION = None
STATEMENTS = ("CreateStmt", "AlterTableStmt.AT_AddColumn")
SMALL = frozenset({"int2", "int4", "int", "integer", "smallint", "serial", "serial2",
                   "serial4", "smallserial"})
SERIAL = frozenset({"serial", "serial2", "serial4", "smallserial"})


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    columns = {str(c.get("colname", "")).lower(): c for c in column_defs(kind, stmt)}
    keyed: list[str] = []
    for name, column in columns.items():
        if any(c.get("contype") == "CONSTR_PRIMARY" for c in constraints(column)):
            keyed.append(name)
    for element in stmt.get("tableElts") or ():
        constraint = element.get("Constraint", {})
        if constraint.get("contype") == "CONSTR_PRIMARY":
            keyed += [k.lower() for k in strings(constraint.get("keys"))]
    keyed = list(dict.fromkeys(keyed))
    for name in keyed:
        key = columns.get(name)
        if key is None or type_name(key.get("typeName")) not in SMALL:
            continue
        if len(keyed) == 1 or _generates(key):
            yield Hit(f"{name} {type_name(key.get('typeName'))}", key.get("location"))


def _generates(column: Node) -> bool:
    """Whether the column fills itself: serial, an identity, or a nextval() default."""
    if type_name(column.get("typeName")) in SERIAL:
        return True
    for constraint in constraints(column):
        if constraint.get("contype") == "CONSTR_IDENTITY":
            return True
        if constraint.get("contype") == "CONSTR_DEFAULT" and "nextval" in function_names(
                constraint.get("raw_expr")):
            return True
    return False
