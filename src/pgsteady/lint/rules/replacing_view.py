"""CREATE OR REPLACE VIEW on an existing view takes ACCESS EXCLUSIVE on the view.

Replacing a view's definition locks the view against every query that reads it (ACCESS
EXCLUSIVE), so it queues behind any long report on the view, and every later query queues
behind it: the lock queue of an ``ALTER TABLE``, on a view. It also breaks running code if a
column changes meaning (only adding columns at the end is allowed, but code that selects
``*`` sees them at once). squawk does not report it. Keep ``lock_timeout`` short and retry,
or create a new view under a new name and move the code to it. A view created in the same
change is fine, and so is one dropped earlier in the same file (OR REPLACE then creates it);
with no history or ``--dsn``, a view the linter does not know is assumed to exist (that is
what OR REPLACE is for).
"""

from __future__ import annotations

from collections.abc import Iterator

from pgsteady.lint.base import Context, Hit, Node, qualified

ID = "replacing-view"
MESSAGE = "CREATE OR REPLACE VIEW takes ACCESS EXCLUSIVE on the view"
HELP = ("Keep the lock wait short and retry: SET lock_timeout = '2s'; CREATE OR REPLACE VIEW "
        "v AS ...;  or create v_v2 and move the code to it, then drop v")
MIN_PG_VERSION = None
STATEMENTS = ("ViewStmt",)


def check(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
    view = stmt.get("view") or {}
    if not stmt.get("replace") or ctx.schema.view_is_new(view):
        return
    if not ctx.schema.view_exists(view) and \
            ctx.schema.key(view, ctx.schema.views) in ctx.dropped_views:
        return  # dropped above: OR REPLACE creates it
    if ctx.schema.from_catalog and not ctx.schema.view_exists(view):
        return
    yield Hit(qualified(view), view.get("location"))
