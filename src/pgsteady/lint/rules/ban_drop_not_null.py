"""DROP NOT NULL breaks readers that rely on the column never being NULL.

Code, reports and downstream consumers written against a NOT NULL column do not expect
NULL; the first NULL written by new code breaks them (a NoneType error, a wrong join, a
missing row in an aggregate). Make sure every reader handles NULL and deploy that first.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified

ID = "ban-drop-not-null"
MESSAGE = "DROP NOT NULL lets NULLs reach readers that assume there are none"
HELP = ("Make every reader handle NULL and deploy that first; then: "
        "ALTER TABLE t ALTER COLUMN c DROP NOT NULL;  (ignore this rule there with the reason)")
MIN_PG_VERSION = None
COMMANDS = ("AT_DropNotNull",)


def check(subtype: str, cmd: Node, ctx: Context) -> Iterator[Hit]:
    yield Hit(f"{qualified(ctx.relation)}.{cmd.get('name', '')}", command=cmd)
