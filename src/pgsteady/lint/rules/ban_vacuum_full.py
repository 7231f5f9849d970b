"""VACUUM FULL rewrites the table under ACCESS EXCLUSIVE; squawk misses it.

``VACUUM FULL`` copies the whole table into a new file and rebuilds its indexes while
holding ACCESS EXCLUSIVE: no reads, no writes, for minutes to hours. It also needs free disk
for a full second copy. A plain ``VACUUM`` (SHARE UPDATE EXCLUSIVE) does not block traffic;
to reclaim space online use pg_repack or pg_squeeze. VACUUM cannot run inside a transaction
block either, so it rarely belongs in a migration at all.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, option_names, qualified, table_ref

ID = "ban-vacuum-full"
MESSAGE = "VACUUM FULL rewrites the table and blocks all reads and writes"
HELP = ("Use plain VACUUM (ANALYZE) t; to reclaim space online use pg_repack "
        "(pg_repack --table t) outside the migration")
MIN_PG_VERSION = None
STATEMENTS = ("VacuumStmt",)
SIZE_AWARE = True


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    if not stmt.get("is_vacuumcmd") or "full" not in option_names(stmt.get("options")):
        return
    relations = [r.get("VacuumRelation", {}).get("relation") for r in stmt.get("rels") or ()]
    relations = [r for r in relations if r]
    if not relations:
        yield Hit("of the whole database")
    for relation in relations:
        yield Hit(f"of {qualified(relation)}", table=table_ref(relation))
