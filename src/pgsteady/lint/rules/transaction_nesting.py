"""Nested, unmatched or unclosed transactions do not do what the file seems to say.

A ``BEGIN`` inside a transaction only warns; the first ``COMMIT`` then commits everything,
so the "inner" transaction protects nothing. A ``COMMIT`` with no ``BEGIN`` commits the
runner's transaction early (``pgsteady migrate`` wraps each file in one). A ``BEGIN`` never
committed leaves the work to be rolled back when the session ends, or held open, with its
locks, by a pooled connection. Let the runner own the transaction, or pair each BEGIN with a
COMMIT in the same file.

Tools that send the whole file as one multi-statement query (Prisma's ``migrate deploy``,
golang-migrate, Diesel without a transaction) open no transaction of their own: PostgreSQL
runs the query as one *implicit* transaction, and a ``BEGIN`` in it turns that into an
explicit block, without a warning, keeping what ran before it. ``BEGIN; ... COMMIT;`` is
then the way to make such a file atomic (Prisma writes it around an enum change itself):
not reported, unless statements follow its ``COMMIT``: they run in a new implicit
transaction, so a failure there leaves the block committed and the file half applied. A
``COMMIT`` with no ``BEGIN`` still commits what ran before it early, with a warning, and one
never committed still leaves the session in a transaction.
https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-FLOW-MULTI-STATEMENT
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node

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
        if ctx.transaction_depth == 0 and ctx.implicit_transaction:
            return  # the implicit transaction becomes this explicit block: nothing nests
        where = "the runner's" if ctx.transaction_depth == 0 else "another"
        yield Hit(f"BEGIN inside {where} transaction; the first COMMIT ends both")
    elif what in _CLOSE and ctx.transaction_depth == 0:
        if ctx.implicit_transaction:
            yield Hit(f"{verb} without a BEGIN ends the file's implicit transaction early")
        else:
            yield Hit(f"{verb} ends the runner's transaction early" if ctx.assume_in_transaction
                      else f"{verb} without a BEGIN")


def finish(ctx: Context) -> Iterator[Hit]:
    if ctx.transaction_depth > 0 and ctx.open_transaction_at is not None:
        yield Hit("BEGIN is never committed", ctx.open_transaction_at)
    if ctx.implicit_transaction and ctx.after_commit_at is not None:
        yield Hit("a statement after the block's COMMIT runs in a new implicit transaction: "
                  "if it fails, the block stays committed (the file is not atomic)",
                  ctx.after_commit_at)
