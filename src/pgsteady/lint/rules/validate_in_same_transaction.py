"""VALIDATE CONSTRAINT in the transaction that added it NOT VALID keeps the lock for the scan.

``ADD CONSTRAINT ... NOT VALID`` is cheap only because its ACCESS EXCLUSIVE lock is released
at once; ``VALIDATE CONSTRAINT`` then scans with a weaker lock. In the same transaction the
first lock is still held, so the whole scan runs under ACCESS EXCLUSIVE: exactly what NOT
VALID was meant to avoid. ``pgsteady migrate`` runs each file in one transaction, so put the
VALIDATE (and a SET NOT NULL that relies on it) in the next migration. A file the runner runs
outside a transaction (see the runner profiles) commits each statement, so there it is fine.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified, table_ref

ID = "validate-in-same-transaction"
MESSAGE = "VALIDATE CONSTRAINT in the same transaction as its NOT VALID add scans under " \
    "ACCESS EXCLUSIVE"
HELP = ("Commit the NOT VALID add first; validate in the next migration: "
        "ALTER TABLE t VALIDATE CONSTRAINT c;")
MIN_PG_VERSION = None
COMMANDS = ("AT_ValidateConstraint",)
NEW_TABLES = True  # NOT VALID on a new table, validated in the same transaction, too
SIZE_AWARE = True


def check(subtype: str, cmd: Node, ctx: Context) -> Iterator[Hit]:
    if not ctx.in_transaction:
        return
    name = str(cmd.get("name", ""))
    if name in ctx.not_valid_in_transaction:
        yield Hit(f"{name} on {qualified(ctx.relation)}", table=table_ref(ctx.relation),
                  command=cmd)
