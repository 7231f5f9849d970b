"""What a failed call says about its statement's fate, decided in one place.

A connection that breaks after a statement was sent leaves its outcome unknown, with one
exception worth telling apart: PgBouncer answering for a statement it never passed to a
server. Behind PgBouncer while PostgreSQL is down, every call fails at once this way; calling
those "it may have been applied" makes a service treat a plain outage as possible double
writes.
"""

from __future__ import annotations

import inspect
from typing import Any

# PgBouncer's own refusals of a client whose query waits for a server connection (it holds
# the query and links no server): its ErrorResponse is SQLSTATE 08P01 with one of these
# messages, then it closes the connection. The SQLSTATE is the same for "server conn
# crashed?" (a server saw the statement), so the message is the only signal. Sources
# (PgBouncer 1.18 to 1.25): objects.c check_fast_fail ("server login has been failing, try
# again later (server_login_retry)", later "..., cached error: ..."), janitor.c's loop over
# waiting clients ("query_wait_timeout"; "query_timeout" with an underscore, whereas a
# query running on a server ends with "query timeout", with a space).
_PGBOUNCER_SQLSTATE = "08P01"
_NOT_SENT_PREFIX = "server login has been failing"
_NOT_SENT_EXACT = frozenset({"query_wait_timeout", "query_timeout"})


def pooler_refusal(exc: BaseException) -> str | None:
    """The caller's explanation if PgBouncer refused ``exc``'s statement before any server
    saw it (nothing was applied: a retry is safe), else None."""
    if getattr(exc, "sqlstate", None) != _PGBOUNCER_SQLSTATE:
        return None
    diag = getattr(exc, "diag", None)
    message = str(getattr(diag, "message_primary", None) or "").strip()
    if not (message.startswith(_NOT_SENT_PREFIX) or message in _NOT_SENT_EXACT):
        return None
    return (f"PgBouncer refused the statement before any server saw it ({message}): nothing "
            f"of it was applied; safe to retry once the database is back")


# -- a pooler refusing the session settings sent at connect ---------------------------------------

# PgBouncer answers a startup packet carrying ``options`` (how pooler="direct" sends the
# session settings) with this FATAL, before any server is involved; psycopg_pool would retry it
# in silence until the caller's deadline passed.
_REFUSED_OPTIONS = "unsupported startup parameter"


def refused_options(exc: BaseException, pooler: str) -> str | None:
    """The one-line fix if ``exc`` is a pooler refusing the startup ``options`` that
    ``pooler`` sent, else None."""
    if pooler != "direct" or _REFUSED_OPTIONS not in str(exc):
        return None
    return ("the server refused the session settings sent at connect (\"unsupported startup "
            "parameter\"): this DSN goes through a pooler such as PgBouncer; pass "
            "pooler=\"transaction\" (or \"session\", as its pool_mode is)")


def watching(base: type[Any], seen: list[str], pooler: str) -> type[Any]:
    """``base`` (a pool's connection class, sync or async) whose ``connect`` notes in ``seen``
    a refusal of the startup options, so that waiting callers can fail at once with the fix
    instead of at their deadline."""
    if pooler != "direct":
        return base
    watched: type[Any]
    if inspect.iscoroutinefunction(base.connect):
        async def aconnect(cls: type[Any], conninfo: str = "", **kwargs: Any) -> Any:
            try:
                return await super(watched, cls).connect(conninfo, **kwargs)
            except Exception as exc:
                if (fix := refused_options(exc, pooler)) is not None:
                    seen.append(fix)
                raise

        connect: Any = aconnect
    else:
        def connect(cls: type[Any], conninfo: str = "", **kwargs: Any) -> Any:
            try:
                return super(watched, cls).connect(conninfo, **kwargs)
            except Exception as exc:
                if (fix := refused_options(exc, pooler)) is not None:
                    seen.append(fix)
                raise

    watched = type(base.__name__, (base,), {"connect": classmethod(connect),
                                             "__module__": base.__module__})
    return watched
