"""``json`` columns store text verbatim; ``jsonb`` is what almost every application wants.

``json`` has no equality operator (``SELECT DISTINCT``, ``GROUP BY`` and ``UNION`` fail on
it), cannot be indexed with GIN, and re-parses the text on every access. ``jsonb`` stores
the parsed value, supports equality, containment (``@>``) and GIN indexes. Use ``json`` only
to keep key order or duplicate keys exactly. squawk does not check this.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, type_name, typed_columns

ID = "prefer-jsonb"
MESSAGE = "json column: prefer jsonb"
HELP = "Declare it jsonb: ALTER TABLE t ADD COLUMN data jsonb;"
MIN_PG_VERSION = None
STATEMENTS = (
    "CreateStmt",
    "AlterTableStmt.AT_AddColumn",
    "AlterTableStmt.AT_AlterColumnType",
)


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    for column, type_node, location in typed_columns(kind, stmt):
        if type_name(type_node) == "json":
            yield Hit(column, location)
