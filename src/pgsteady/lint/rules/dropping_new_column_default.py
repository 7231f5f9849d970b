"""A NOT NULL column added with a DEFAULT whose DEFAULT is dropped in the same migration.

Django's ``AddField`` of a NOT NULL field with a default writes ``ADD COLUMN c ... DEFAULT x
NOT NULL`` (to fill existing rows), then ``ALTER COLUMN c DROP DEFAULT`` (Django keeps
defaults in Python, not in the database). Other ORMs and hand-written migrations do the same.
Once it commits, the code still running (the old release, which does not know the column)
inserts rows without it and fails with a not-null violation until every server runs the
new release: an outage the length of the deploy.

Keep the database default until no running code inserts without the column: leave the
``DROP DEFAULT`` out (Django 5.0+: ``db_default=...`` on the field; before, a ``RunSQL``
``SET DEFAULT`` or django-pg-zero-downtime-migrations' ``KEEP_DEFAULT``), or drop it in a
later migration, deployed after the code that writes the column. Both Django peers flag it
(django-migration-linter's ``NOT_NULL``, django-pg-zero-downtime-migrations' keep-default).
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import (
    Context,
    Hit,
    Node,
    constraints,
    qualified,
)

ID = "dropping-new-column-default"
MESSAGE = ("DROP DEFAULT of a NOT NULL column added in the same migration: inserts from code "
           "still running without the column fail until the deploy ends")
HELP = ("Keep the default in the database until no running code inserts without the column "
        "(Django 5+: db_default= on the field; or drop it in a later migration, after the "
        "code that writes the column is deployed)")
MIN_PG_VERSION = None
COMMANDS = ("AT_AddColumn", "AT_ColumnDefault")


def check(subtype: str, cmd: Node, ctx: Context) -> Iterator[Hit]:
    # A table made in this change has no running code writing to it: not handed here.
    key = ctx.key(ctx.relation)
    if subtype == "AT_AddColumn":
        column = (cmd.get("def") or {}).get("ColumnDef") or {}
        kinds = {c.get("contype") for c in constraints(column)}
        if {"CONSTR_NOTNULL", "CONSTR_DEFAULT"} <= kinds:
            ctx.new_columns_with_default.add((key, str(column.get("colname", ""))))
    elif cmd.get("def") is None:
        name = str(cmd.get("name", ""))
        if (key, name) in ctx.new_columns_with_default:
            yield Hit(f"{qualified(ctx.relation)}.{name}", command=cmd)
