"""A migration with no statement_timeout can hold its locks for as long as it runs.

Once it has its locks, a migration statement that turns out slow (a scan, a rewrite, a
backfill) holds them until it ends; with ``statement_timeout`` it is cancelled and rolled
back instead. ``pgsteady migrate`` sets one for every migration, so the rule is silent by
default (``assume_runner_timeouts = true``); turn that off for files run by other tools.
Reported once per file.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.migrate.lint.base import LOCKING_STATEMENTS, Context, Hit, Node, takes_blocking_lock

ID = "require-statement-timeout"
MESSAGE = "a statement that takes a table lock runs with no statement_timeout set"
HELP = ("Bound how long it may hold its locks, at the top of the file: "
        "SET statement_timeout = '60s';  (pgsteady migrate does this for you)")
MIN_PG_VERSION = None
STATEMENTS = tuple(sorted(LOCKING_STATEMENTS | {"UpdateStmt", "DeleteStmt"}))


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    if ctx.assume_runner_timeouts or ctx.statement_timeout_set or ID in ctx.reported:
        return
    if kind in LOCKING_STATEMENTS and not takes_blocking_lock(kind, stmt):
        return
    ctx.reported.add(ID)
    yield Hit()
