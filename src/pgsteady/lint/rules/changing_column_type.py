"""ALTER COLUMN ... TYPE rewrites the table (and its indexes) under ACCESS EXCLUSIVE.

Most type changes rewrite every row and rebuild every index on the table while holding ACCESS
EXCLUSIVE: no reads, no writes, for as long as that takes. A few do not, because the old
values are already valid in the new type: ``varchar(n)`` -> ``text`` or ``varchar``,
``text`` -> ``varchar`` (unbounded), widening ``varchar(n)`` -> ``varchar(m)`` with m >= n,
widening a ``numeric`` precision at the same scale, and dropping a modifier. Everything else
rewrites, including ``integer`` -> ``text``, ``char(n)`` -> ``varchar(n)`` (it trims blanks),
``text`` -> ``varchar(n)`` and narrowing a ``varchar``; any ``USING`` rewrites.

The rule knows the column's current type from the schema replayed from the migration folder
(earlier files, ``--history``) or from the live catalog with ``--dsn``. When it cannot know,
it still reports, as a warning that the change *may* rewrite, for targets some type reaches
without one (``text``, ``varchar``, ``numeric``, timestamps); other targets (``bigint``, ...)
rewrite from anything but themselves and stay errors. For a rewrite: add a new column,
backfill it in batches, switch reads and writes, then drop the old one.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import (
    Context,
    Hit,
    Node,
    qualified,
    table_ref,
)
from pgsteady.lint.schema import MAYBE_NO_REWRITE, column_type, rewrites

ID = "changing-column-type"
MESSAGE = "changing a column's type rewrites the table and its indexes under ACCESS EXCLUSIVE"
HELP = ("Add a new column, backfill it in batches, move reads and writes, drop the old one: "
        "ALTER TABLE t ADD COLUMN c_new bigint; UPDATE t SET c_new = c WHERE id BETWEEN ... ; "
        "(varchar -> text, or widening a varchar, needs none of this)")
MIN_PG_VERSION = None
COMMANDS = ("AT_AlterColumnType",)
SIZE_AWARE = True


def check(subtype: str, cmd: Node, ctx: Context) -> Iterator[Hit]:
    relation = ctx.relation
    column = (cmd.get("def") or {}).get("ColumnDef", {})
    type_node = column.get("typeName") or {}
    target = column_type(type_node)
    if target is None:
        return
    name = str(cmd.get("name", ""))
    old = ctx.schema.type_of(relation, name)
    using = column.get("raw_default") is not None
    where = f"{qualified(relation)}.{name}"
    if using:
        yield Hit(f"{where} to {target} USING ...", type_node.get("location"),
                  table_ref(relation))
        return
    verdict = rewrites(old, target)
    if verdict is False:
        return
    if verdict is True:
        yield Hit(f"{where} from {old} to {target}", type_node.get("location"),
                  table_ref(relation))
    elif target.name in MAYBE_NO_REWRITE:
        yield Hit(f"{where} to {target} may rewrite: its current type is unknown; lint "
                  f"the whole migration folder, or give --history or --dsn",
                  type_node.get("location"), table_ref(relation), severity="warning")
    else:
        yield Hit(f"{where} to {target} (no rewrite only if it already is {target})",
                  type_node.get("location"), table_ref(relation))
