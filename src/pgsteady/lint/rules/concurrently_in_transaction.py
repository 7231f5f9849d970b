"""CONCURRENTLY inside a transaction block fails: the statement must run on its own.

``CREATE INDEX CONCURRENTLY``, ``DROP INDEX CONCURRENTLY``, ``REINDEX ... CONCURRENTLY`` and
``ALTER TABLE ... DETACH PARTITION ... CONCURRENTLY`` commit internally between phases, so
PostgreSQL refuses them inside ``BEGIN ... COMMIT`` ("cannot run inside a transaction
block"). The migration fails at deploy time instead of in review. Put each such statement in
its own migration file that the runner executes outside a transaction: for ``pgsteady
migrate``, a file whose header says ``-- pgsteady: no-transaction``; goose's ``-- +goose NO
TRANSACTION``, dbmate's ``-- migrate:up transaction:false``, a Flyway script (Flyway runs
one holding ``CREATE``/``DROP INDEX CONCURRENTLY`` without a transaction by itself, unless
``executeInTransaction=true``; not ``REINDEX``/``DETACH ... CONCURRENTLY``), Diesel's
``run_in_transaction = false`` in ``metadata.toml``, sql-migrate's ``-- +migrate Up
notransaction``, tern's ``---- tern: disable-tx ----``, a Prisma or golang-migrate file
holding that one statement.
The runner profile (``--tool``, detected from the folder) knows each tool's convention; a
``DO`` block is always one transaction.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, alter_commands, option_names

ID = "concurrently-in-transaction"
MESSAGE = "a CONCURRENTLY statement cannot run inside a transaction block"
HELP = ("Move it to a migration of its own, run outside a transaction; for pgsteady migrate "
        "the file starts: -- pgsteady: no-transaction  then the one statement: "
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS idx ON t (col);")
MIN_PG_VERSION = None
STATEMENTS = ("IndexStmt", "DropStmt", "ReindexStmt", "AlterTableStmt.AT_DetachPartition")


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    if not ctx.in_transaction:
        return
    if kind in ("IndexStmt", "DropStmt") and stmt.get("concurrent"):
        yield Hit("CREATE INDEX CONCURRENTLY" if kind == "IndexStmt"
                  else "DROP ... CONCURRENTLY")
    elif kind == "ReindexStmt" and "concurrently" in option_names(stmt.get("params")):
        yield Hit("REINDEX CONCURRENTLY")
    elif kind == "AlterTableStmt":
        for subtype, cmd in alter_commands(stmt):
            partition = (cmd.get("def") or {}).get("PartitionCmd", {})
            if subtype == "AT_DetachPartition" and partition.get("concurrent"):
                yield Hit("DETACH PARTITION CONCURRENTLY", command=cmd)
