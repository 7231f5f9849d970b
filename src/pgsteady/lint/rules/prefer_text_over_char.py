"""``char(n)`` pads with spaces and is no faster than ``text`` or ``varchar``.

``character(n)`` blank-pads values to n characters, compares ignoring trailing spaces and
strips them on cast to text: surprising results, and no storage or speed advantage in
PostgreSQL. Use ``text`` (with a CHECK on length if a limit matters) or ``varchar(n)``.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, type_name, typed_columns

ID = "prefer-text-over-char"
MESSAGE = "char(n) column: prefer text (or varchar)"
HELP = ("Declare it text, with a CHECK if a length limit matters: "
        "code text CHECK (length(code) <= 3)")
MIN_PG_VERSION = None
STATEMENTS = (
    "CreateStmt",
    "AlterTableStmt.AT_AddColumn",
    "AlterTableStmt.AT_AlterColumnType",
)


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    for column, type_node, location in typed_columns(kind, stmt):
        if type_name(type_node) in ("bpchar", "char", "character"):
            yield Hit(column, location)
