"""``serial`` is a legacy shorthand; identity columns are the standard, safer form.

A ``serial`` column owns a separate sequence with its own permissions, which dumps, copies
(``CREATE TABLE ... LIKE``) and grants handle awkwardly, and nothing stops code from writing
ids by hand. ``GENERATED ALWAYS AS IDENTITY`` (PostgreSQL 10+) ties the sequence to the
column and refuses explicit values unless ``OVERRIDING SYSTEM VALUE`` is given.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady import _majors
from pgsteady.lint.base import Context, Hit, Node, column_defs, type_name

ID = "prefer-identity"
MESSAGE = "serial column: prefer an identity column"
HELP = "Use: id bigint GENERATED ALWAYS AS IDENTITY"
MIN_PG_VERSION = _majors.IDENTITY_COLUMNS
STATEMENTS = ("CreateStmt", "AlterTableStmt.AT_AddColumn")
SERIALS = frozenset({"serial", "serial2", "serial4", "serial8", "smallserial", "bigserial"})


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    for column in column_defs(kind, stmt):
        if type_name(column.get("typeName")) in SERIALS:
            yield Hit(f"{column.get('colname', '')} {type_name(column.get('typeName'))}",
                      column.get("location"))
