"""ALTER TYPE ... RENAME VALUE breaks running code that reads or writes the old label.

Renaming an enum label is instant, but from that moment every running instance that
inserts the old label fails (``invalid input value for enum``) and code comparing with the
new one does not exist yet: a rename cannot be deployed without errors in between. squawk
does not report it. Add the new label (``ALTER TYPE t ADD VALUE 'new'``), move the code and
the rows to it, and stop using the old one; enum labels cannot be dropped, so a label
rename is rarely worth it. An enum created in the same change is fine.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady import _majors
from pgsteady.lint.base import Context, Hit, Node, strings

ID = "renaming-enum-value"
MESSAGE = "renaming an enum value breaks code that uses the old label"
HELP = ("Add the new label, move code and rows to it, stop using the old one: "
        "ALTER TYPE mood ADD VALUE 'content';  UPDATE t SET m = 'content' WHERE m = 'ok' ...")
MIN_PG_VERSION = _majors.RENAME_ENUM_VALUE
STATEMENTS = ("AlterEnumStmt",)


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    old = stmt.get("oldVal")
    if not old:
        return
    names = strings(stmt.get("typeName"))
    if ctx.schema.enum_is_new(names):
        return
    yield Hit(f"{'.'.join(names)}: '{old}' -> '{stmt.get('newVal', '')}'")
