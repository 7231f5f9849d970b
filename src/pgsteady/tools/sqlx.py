"""sqlx: ``<version>_<name>.sql``, named as pgsteady's layout names them, so a sqlx folder runs
as the ``pgsteady`` layout, with pgsteady's own history. sqlx runs a file outside a
transaction when its first line is exactly ``-- no-transaction``; pgsteady's layout and lint
honour it like ``-- pgsteady: no-transaction``."""

from __future__ import annotations

import re

NO_TRANSACTION = re.compile(r"-- no-transaction[ \t]*(?:\n|$)")


def no_transaction(text: str) -> bool:
    """Whether a file starts with sqlx's ``-- no-transaction`` line."""
    return NO_TRANSACTION.match(text) is not None
