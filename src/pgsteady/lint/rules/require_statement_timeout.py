"""A migration with no statement_timeout can hold its locks for as long as it runs.

Once it has its locks, a migration statement that turns out slow (a scan, a rewrite, a
backfill) holds them until it ends; with ``statement_timeout`` it is cancelled and rolled
back instead. ``pgsteady migrate`` sets one for every migration, so the rule is silent by
default (``assume_runner_timeouts = true``); turn that off for files run by other tools.
Reported once per file, at the first such statement on a table the change did not create:
a table created earlier in the change (an init migration) is nobody else's yet, so holding
its lock blocks no one, and it holds only rows the change wrote.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import (
    LOCKING_STATEMENTS,
    Context,
    Hit,
    Node,
    only_new_tables,
    takes_blocking_lock,
)

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
    if only_new_tables(kind, stmt, ctx):
        return  # a table this change created: nobody else holds or waits for its lock
    ctx.reported.add(ID)
    yield Hit()
