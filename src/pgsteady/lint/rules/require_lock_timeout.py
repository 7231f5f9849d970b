"""A lock-taking statement with no lock_timeout can queue forever and block everyone behind it.

Without ``lock_timeout``, an ``ALTER TABLE`` waiting behind a long query waits as long as
that query runs, and every new query on the table queues behind the ALTER: the outage of
seed 002. ``SET lock_timeout`` first makes the migration give up after a few seconds
instead (retry later). ``pgsteady migrate`` sets it for every migration, so the rule is
silent by default (``assume_runner_timeouts = true``); turn that off for files run by
other tools (psql, Flyway, a service at startup). Reported once per file, at the first such
statement on a table the change did not create: a table created earlier in the change (an
init migration) is nobody else's yet, so its lock is granted at once (inside the creating
transaction no other session can even see it; run statement by statement, nothing uses a
table created a moment ago).
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

ID = "require-lock-timeout"
MESSAGE = "a statement that takes a table lock runs with no lock_timeout set"
HELP = ("Bound the wait at the top of the file (the runner retries later): "
        "SET lock_timeout = '5s';  (pgsteady migrate does this for you)")
MIN_PG_VERSION = None
STATEMENTS = tuple(sorted(LOCKING_STATEMENTS))


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    if ctx.assume_runner_timeouts or ctx.lock_timeout_set or ID in ctx.reported:
        return
    if kind in LOCKING_STATEMENTS and not takes_blocking_lock(kind, stmt):
        return
    if only_new_tables(kind, stmt, ctx):
        return  # a table this change created: nobody else holds or waits for its lock
    ctx.reported.add(ID)
    yield Hit()
