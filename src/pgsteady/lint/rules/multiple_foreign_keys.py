"""Foreign keys to several tables in one transaction lock all of them until it commits.

Each new foreign key takes SHARE ROW EXCLUSIVE on the table it references (no writes there)
and the transaction keeps every such lock until it ends. One migration adding references to
``customers``, ``products`` and ``warehouses`` blocks writes to all three for its whole
duration, and is that much likelier to queue behind someone's long query. strong_migrations
reports it too. Add each foreign key in its own migration. Tables created in the same change
do not count: nobody else is writing to them yet (nor does a new table's key to itself).
Reported once per transaction, at the statement whose foreign keys bring it to two tables (a
Prisma migration adds each key in a statement of its own: the third and later keys add no
finding of their own).
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, existing_foreign_key_targets

ID = "multiple-foreign-keys"
MESSAGE = "foreign keys to several tables in one transaction block writes to all of them"
HELP = ("Add one foreign key per migration (each NOT VALID, validated later): "
        "ALTER TABLE orders ADD CONSTRAINT orders_customer_fk FOREIGN KEY (customer_id) "
        "REFERENCES customers (id) NOT VALID;")
MIN_PG_VERSION = None
STATEMENTS = ("CreateStmt", "AlterTableStmt.AT_AddConstraint", "AlterTableStmt.AT_AddColumn")


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    if not ctx.in_transaction:
        return
    targets = existing_foreign_key_targets(kind, stmt, ctx)
    before = ctx.fk_targets_in_transaction
    locked_now = before | set(targets)
    if len(before) < 2 <= len(locked_now):  # once per transaction, where it reaches two
        locked = sorted(locked_now)
        yield Hit(", ".join(f"{schema}.{name}" if schema != "public" else name
                            for schema, name in locked))
