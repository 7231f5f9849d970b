"""SET NOT NULL scans the whole table under ACCESS EXCLUSIVE, unless a CHECK proves it.

``ALTER COLUMN ... SET NOT NULL`` checks every row while holding ACCESS EXCLUSIVE (no reads,
no writes). Since PostgreSQL 12 it skips the scan when a *validated* ``CHECK (col IS NOT
NULL)`` constraint already proves it. So: add that CHECK ``NOT VALID`` (brief lock), validate
it (SHARE UPDATE EXCLUSIVE: reads and writes go on), then SET NOT NULL (instant), then drop
the CHECK. The rule is satisfied by such a validated check earlier in the same file, or by a
``VALIDATE CONSTRAINT`` earlier in the file of a constraint an earlier migration added (its
definition is not visible here; the rule trusts it). With ``pgsteady migrate`` each file is
one transaction, so add the CHECK in one migration and validate it in the next. A column
already NOT NULL (declared so in an earlier migration, or a primary key's) is not scanned
again: PostgreSQL sees the flag set and does nothing, so it is not reported. Before 12 the
CHECK does not help and the rule says so: run it at a quiet time with a short lock_timeout.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady import _majors
from pgsteady.lint.base import (
    Context,
    Hit,
    Node,
    qualified,
    table_ref,
)

ID = "set-not-null-without-check"
MESSAGE = "SET NOT NULL scans the whole table under ACCESS EXCLUSIVE"
HELP = ("Prove it first with a validated CHECK: "
        "ALTER TABLE t ADD CONSTRAINT t_col_nn CHECK (col IS NOT NULL) NOT VALID; "
        "ALTER TABLE t VALIDATE CONSTRAINT t_col_nn; "
        "ALTER TABLE t ALTER COLUMN col SET NOT NULL; "
        "ALTER TABLE t DROP CONSTRAINT t_col_nn;")
HELP_BEFORE = ("This major scans even with a validated CHECK (PostgreSQL 12 skips it): run it "
               "at a quiet time with a short lock_timeout and retries, or upgrade to 12+ and "
               "prove it with a validated CHECK (col IS NOT NULL) first")
MIN_PG_VERSION = None
FEATURE = _majors.NOT_NULL_FROM_CHECK
COMMANDS = ("AT_SetNotNull",)
SIZE_AWARE = True


def check(subtype: str, cmd: Node, ctx: Context) -> Iterator[Hit]:
    relation = ctx.relation
    table = ctx.key(relation)
    # Before 12 a validated CHECK proves nothing to SET NOT NULL: it scans all the same.
    proves = _majors.supports(ctx.pg_version, FEATURE)
    if proves and table in ctx.validated_elsewhere:
        return  # the CHECK was added by an earlier migration and validated just now
    known = ctx.schema.table(relation)
    column = str(cmd.get("name", ""))
    if (known is None or column not in known.not_null) \
            and not (proves and (table, column.lower()) in ctx.proven_not_null):
        yield Hit(f"{qualified(relation)}.{column}", table=table_ref(relation), command=cmd)
