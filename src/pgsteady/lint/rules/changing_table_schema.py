"""ALTER TABLE ... SET SCHEMA moves the table: code that names it the old way breaks.

Moving a table to another schema takes ACCESS EXCLUSIVE on it (queuing behind every query,
and every query behind it) and changes its qualified name: queries that say
``old_schema.t``, or find ``t`` through a ``search_path`` that lacks the new schema, fail
with "relation does not exist" from that moment, in every running instance. squawk does not
report it. Create the table under its new name first and move the code, or leave a view
with the old name behind (``CREATE VIEW old_schema.t AS SELECT * FROM new_schema.t``).
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified

ID = "changing-table-schema"
MESSAGE = "ALTER ... SET SCHEMA breaks code that uses the old qualified name"
HELP = ("Keep the old name working until the code has moved: ALTER TABLE s.t SET SCHEMA s2; "
        "CREATE VIEW s.t AS SELECT * FROM s2.t;  (with a short lock_timeout)")
MIN_PG_VERSION = None
STATEMENTS = ("AlterObjectSchemaStmt",)
_KINDS = {"OBJECT_TABLE": "table", "OBJECT_VIEW": "view", "OBJECT_MATVIEW": "materialized view",
          "OBJECT_SEQUENCE": "sequence", "OBJECT_TYPE": "type", "OBJECT_FUNCTION": "function"}


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    what = _KINDS.get(stmt.get("objectType", ""))
    relation = stmt.get("relation")
    if what is None or (relation is not None and ctx.is_new_table(relation)):
        return
    name = qualified(relation) if relation is not None else "object"
    yield Hit(f"{what} {name} -> schema {stmt.get('newschema', '?')}",
              (relation or {}).get("location"))
