"""Nested, unmatched or unclosed transactions do not do what the file seems to say.

A ``BEGIN`` inside a transaction only warns; the first ``COMMIT`` then commits everything,
so the "inner" transaction protects nothing. A ``COMMIT`` with no ``BEGIN`` commits the
runner's transaction early (``pgsteady migrate`` wraps each file in one). A ``BEGIN`` never
committed leaves the work to be rolled back when the session ends, or held open, with its
locks, by a pooled connection. Let the runner own the transaction, or pair each BEGIN with a
COMMIT in the same file.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.migrate.lint.base import Context, Hit, Node

ID = "transaction-nesting"
MESSAGE = "transaction blocks do not nest"
HELP = ("Let the migration runner own the transaction (no BEGIN/COMMIT in the file), or "
        "pair each BEGIN; with one COMMIT; in the same file")
MIN_PG_VERSION = None
STATEMENTS = ("TransactionStmt",)
_OPEN = ("TRANS_STMT_BEGIN", "TRANS_STMT_START")
_CLOSE = ("TRANS_STMT_COMMIT", "TRANS_STMT_ROLLBACK")


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    what = stmt.get("kind", "")
    verb = what.removeprefix("TRANS_STMT_")
    if what in _OPEN and ctx.in_transaction:
        where = "the runner's" if ctx.transaction_depth == 0 else "another"
        yield Hit(f"BEGIN inside {where} transaction; the first COMMIT ends both")
    elif what in _CLOSE and ctx.transaction_depth == 0:
        yield Hit(f"{verb} ends the runner's transaction early" if ctx.assume_in_transaction
                  else f"{verb} without a BEGIN")


def finish(ctx: Context) -> Iterator[Hit]:
    if ctx.transaction_depth > 0 and ctx.open_transaction_at is not None:
        yield Hit("BEGIN is never committed", ctx.open_transaction_at)
