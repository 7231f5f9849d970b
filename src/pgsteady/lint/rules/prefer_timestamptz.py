"""``timestamp`` (without time zone) drops the offset; ``timestamptz`` stores an instant.

A ``timestamp without time zone`` stores wall-clock digits: the same value means different
instants for sessions in different time zones, and arithmetic across daylight-saving
changes goes wrong. ``timestamptz`` stores an absolute instant and converts on output. It
takes the same 8 bytes.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, type_name, typed_columns

ID = "prefer-timestamptz"
MESSAGE = "timestamp without time zone: prefer timestamptz"
HELP = "Declare it timestamptz: created_at timestamptz NOT NULL DEFAULT now()"
MIN_PG_VERSION = None
STATEMENTS = (
    "CreateStmt",
    "AlterTableStmt.AT_AddColumn",
    "AlterTableStmt.AT_AlterColumnType",
)


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    for column, type_node, location in typed_columns(kind, stmt):
        if type_name(type_node) == "timestamp":
            yield Hit(column, location)
