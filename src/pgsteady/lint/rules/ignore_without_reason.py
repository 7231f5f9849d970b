"""An ignore comment must say why the statement is safe, for the reviewer and the next reader.

``-- pgsteady: ignore <rule-id>`` alone hides a risk without a record of why it was judged
acceptable. Write the reason after a second ``--``: ``-- pgsteady: ignore ban-drop-column --
column unused since release 41``. Reported by the engine; the ignore still applies.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node

ID = "ignore-without-reason"
MESSAGE = "ignore comment without a reason"
HELP = "Add the reason: -- pgsteady: ignore ban-drop-column -- unused since release 41"
MIN_PG_VERSION = None
STATEMENTS: tuple[str, ...] = ()


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    return iter(())
