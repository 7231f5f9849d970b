"""An ignore comment that suppresses nothing is stale or misspelled.

``-- pgsteady: ignore <rule-id> -- <reason>`` silences a rule for the next statement (or the
statement it sits in, or the one it follows on the same line); ``ignore-file`` silences it
for the whole file. One that matches no finding, names no rule, or has no statement after
it is reported here, so a stale ignore cannot hide a future problem. Reported by the engine.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node

ID = "unused-ignore"
MESSAGE = "ignore comment that suppresses nothing"
HELP = ("Remove it, or fix the rule id: -- pgsteady: ignore require-concurrent-index-creation "
        "-- table is created empty in this release")
MIN_PG_VERSION = None
STATEMENTS: tuple[str, ...] = ()


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    return iter(())
