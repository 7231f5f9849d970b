"""One reusable cursor per connection for one-statement calls.

``conn.execute`` builds a new cursor, and with it a copy of the connection's adapter map, on
every call: 15 µs of a 107 µs ``select 1`` on loopback (measured beside a reused cursor,
asyncio). A one-statement call takes its connection's spare cursor instead, and puts it back
only if what it holds is small: a cursor keeps its last result and parameters until its next
statement, and a connection must not pin a large result while it idles. A statement its
caller left (``pgsteady._direct``) never puts its cursor back.

By hand because psycopg has no public way to run a statement without a fresh cursor or to
drop a cursor's result and keep the cursor.
"""

from __future__ import annotations

from typing import Any

KEEP_BYTES = 8192
"""A cursor is kept only if its result is one row (or none) of at most this many bytes and
its parameters are as small."""

_ATTR = "_pgsteady_cursor"


def take(conn: Any) -> Any:
    """``conn``'s spare cursor (removed from it while in use), or a new one."""
    cur = conn.__dict__.pop(_ATTR, None)
    if cur is None or cur.closed:
        return conn.cursor()
    return cur


def put_back(conn: Any, cur: Any, params: Any) -> None:
    """Keep ``cur`` for ``conn``'s next call if what it holds is small (see the module
    docstring); otherwise it goes with the call."""
    result = cur.pgresult
    if result is not None and (result.ntuples > 1 or (result.ntuples == 1 and sum(
            len(result.get_value(0, col) or b"") for col in range(result.nfields))
            > KEEP_BYTES)):
        return
    if params and not _small(params):
        return
    conn.__dict__[_ATTR] = cur


def _small(params: Any) -> bool:
    values = params.values() if isinstance(params, dict) else params
    total = 0
    for value in values:
        if isinstance(value, str | bytes | bytearray | memoryview):
            total += len(value)
        elif not isinstance(value, int | float | bool) and value is not None:
            return False  # a list, a JSON document...: not worth measuring
        if total > KEEP_BYTES:
            return False
    return True
