"""Session settings, durations, and DSNs that are safe to print.

A DSN may carry a password; anything pgsteady prints or logs goes through :func:`redact`.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import socket
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, TypeAlias

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgsteady.errors import UsageError
from pgsteady.sql import text as sqltext

Duration: TypeAlias = float | int | timedelta | None
"""Seconds as a number, or a ``timedelta``; ``None`` means no limit."""


def to_seconds(value: Duration, name: str = "duration") -> float | None:
    """Normalise a duration to float seconds; ``None`` and infinity mean no limit. Anything
    else that is not a non-negative number of seconds or a ``timedelta`` is a UsageError."""
    if value is None:
        return None
    raw: object = value  # callers' types are checked here, not trusted
    if isinstance(raw, timedelta):
        seconds = raw.total_seconds()
    elif isinstance(raw, int | float) and not isinstance(raw, bool):
        seconds = float(raw)
    else:
        raise UsageError(f"{name} must be seconds (a number), a timedelta or None; got "
                         f"{type(value).__name__} {value!r}")
    if not seconds >= 0:  # also refuses NaN
        raise UsageError(f"{name} must be a non-negative duration, got {value!r}")
    return None if math.isinf(seconds) else seconds


PG_MAX_TIMEOUT = 2147483.647
"""PostgreSQL's largest timeout setting (INT_MAX milliseconds, ~24.8 days)."""

_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str) -> float:
    """``"50ms"`` -> 0.05; a bare number is seconds. Negative ones, and ones longer than
    PostgreSQL's largest timeout (which would fail later, deep inside a run), are a
    UsageError saying how to write it. The one parser of written durations: the command
    line's options, the model's phase-map axes and config files all read them here."""
    m = _DURATION.match(text)
    if not m:
        raise UsageError(f"{text!r} is not a duration; write it like 50ms, 1.5s, 2m or 1h")
    seconds = float(m[1]) * _UNITS[m[2]]
    if seconds < 0:
        raise UsageError(f"{text!r} is negative; durations must be >= 0")
    if seconds > PG_MAX_TIMEOUT:
        raise UsageError(
            f"{text!r} is too long; durations must be at most {int(PG_MAX_TIMEOUT // 3600)}h")
    return seconds


def server_timeout(value: Duration, name: str) -> float | None:
    """A duration that becomes a PostgreSQL timeout setting: ``None``, 0 and infinity mean
    no limit (PostgreSQL's 0); more than the server accepts is a UsageError, not a connection
    the server refuses later."""
    seconds = to_seconds(value, name)
    if seconds is not None and seconds > PG_MAX_TIMEOUT:
        raise UsageError(f"{name} must be at most {PG_MAX_TIMEOUT:.0f} s (PostgreSQL's limit; "
                         f"None for no limit), got {value!r}")
    return seconds


def redact(dsn: str) -> str:
    """Return ``dsn`` with every password (``password``, ``sslpassword``, in a URL's
    user info or its query string) replaced by ``***``; never raises."""
    try:
        params = conninfo_to_dict(dsn)
    except Exception:  # an unparseable DSN may still hold a password: hide all of it
        return "<unparseable DSN>"
    secrets = [key for key in params if key.endswith("password")]
    if not secrets:
        return dsn
    for key in secrets:
        params[key] = "***"
    return make_conninfo("", **params)


def describe(exc: BaseException) -> str:
    """A driver error in one line, passwords hidden: its message, then PostgreSQL's DETAIL
    and HINT when it sent them (the DETAIL of a unique violation names the duplicate key)."""
    text = str(exc).strip()
    parts = [text.splitlines()[0] if text else type(exc).__name__]
    diag = getattr(exc, "diag", None)
    for label, attr in (("DETAIL", "message_detail"), ("HINT", "message_hint")):
        value = getattr(diag, attr, None) if diag is not None else None
        if value:
            parts.append(f"{label}: {' '.join(str(value).split())}")
    return scrub("; ".join(parts))


def scrub(text: str) -> str:
    """Hide passwords anywhere in free text (error messages that quote a DSN, other sessions'
    queries: every SQL literal form after PASSWORD); see :mod:`pgsteady.sql.text`."""
    return sqltext.scrub(text)


def pg_interval(seconds: float | None) -> str:
    """A duration as a PostgreSQL setting value in whole milliseconds; ``None`` and 0 mean no
    limit (PostgreSQL's 0); anything else is at least 1 ms, never rounded down to "none"."""
    if not seconds:
        return "0"
    return f"{max(1, round(seconds * 1000))}ms"


POOLERS = ("direct", "session", "transaction")


def default_label(service: str) -> str:
    """``service@host:pid``: who opened a session, visible in ``pg_stat_activity``."""
    return f"{service}@{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class SessionSettings:
    """Timeouts and the label every pgsteady session carries, and how they reach the server.

    How depends on what is between us and PostgreSQL (``pooler``):

    - ``direct``: as startup ``options`` (``-c statement_timeout=...``): free per query.
    - ``session`` (PgBouncer session mode): PgBouncer refuses startup ``options``, so a
      plain ``SET`` once per connection; the server connection stays ours.
    - ``transaction`` (PgBouncer transaction mode): a plain ``SET`` would leak to whichever
      client gets that server connection next, so every unit of work is one transaction that
      starts with ``SET LOCAL`` (sent pipelined with the work: no extra round trip).

    ``application_name`` is a startup parameter in every mode (PgBouncer passes it on).
    """

    service: str = "pgsteady"
    statement_timeout: float | None = 30.0
    lock_timeout: float | None = 5.0
    idle_in_transaction_timeout: float | None = 60.0
    pooler: str = "direct"
    application_name: str = ""

    def __post_init__(self) -> None:
        if self.pooler not in POOLERS:
            raise UsageError(f"pooler must be one of {', '.join(POOLERS)}; got {self.pooler!r}")
        if not self.application_name:
            object.__setattr__(self, "application_name", default_label(self.service))

    def for_this_process(self) -> SessionSettings:
        """The same settings labelled with this process's pid: a forked child's sessions must
        not carry its parent's (``pg_stat_activity`` would point at the wrong process)."""
        return replace(self, application_name=default_label(self.service))

    def values(self) -> dict[str, str]:
        return {
            "statement_timeout": pg_interval(self.statement_timeout),
            "lock_timeout": pg_interval(self.lock_timeout),
            "idle_in_transaction_session_timeout": pg_interval(self.idle_in_transaction_timeout),
        }

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``psycopg.connect`` in this pooler mode."""
        kwargs: dict[str, Any] = {"application_name": self.application_name[:63]}
        if self.pooler == "direct":
            kwargs["options"] = " ".join(f"-c {k}={v}" for k, v in self.values().items())
        else:
            # PgBouncer < 1.21 cannot route named prepared statements in transaction mode.
            kwargs["prepare_threshold"] = None
        return kwargs

    def set_query(self) -> tuple[str, tuple[str, ...]]:
        """One statement setting every timeout: session-wide, or ``LOCAL`` in transaction mode."""
        local = "true" if self.pooler == "transaction" else "false"
        calls = ", ".join(f"set_config(%s, %s, {local})" for _ in self.values())
        params = tuple(x for item in self.values().items() for x in item)
        return f"SELECT {calls}", params


def connect_timeout_kwargs(dsn: str, default: int) -> dict[str, Any]:
    """``{"connect_timeout": default}`` unless the DSN (key or URL query) or
    ``PGCONNECT_TIMEOUT`` already sets one: the user's own timeout wins, as libpq users expect."""
    if os.environ.get("PGCONNECT_TIMEOUT", "").strip():
        return {}
    try:
        given = "connect_timeout" in conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        given = False   # psycopg.connect names the bad DSN itself
    return {} if given else {"connect_timeout": default}


def bounded_connect_timeout(dsn: str, budget: float) -> int:
    """The ``connect_timeout`` to pass for a connection that must not take more than
    ``budget`` seconds: the user's own (DSN key or URL query, else ``PGCONNECT_TIMEOUT``) when
    shorter, else the budget; at least 2, as libpq reads anything less as 2."""
    user: str | None = None
    with contextlib.suppress(psycopg.ProgrammingError):  # psycopg.connect names a bad DSN
        user = str(conninfo_to_dict(dsn).get("connect_timeout") or "") or None
    user = user or os.environ.get("PGCONNECT_TIMEOUT", "").strip() or None
    limit = math.ceil(budget)
    with contextlib.suppress(ValueError):  # libpq rejects a malformed one with its own message
        if user is not None and 0 < int(user) < limit:
            limit = int(user)
    return max(2, limit)


def refuse_admin_console(conn: Any, flag: str = "--dsn") -> None:
    """A connection that reached PgBouncer's admin console where PostgreSQL (or a pooled
    database) was meant is a usage error naming the mistake, not a "cannot connect"."""
    server = conn.info.parameter_status("server_version") or ""
    if server.endswith("/bouncer"):
        conn.close()
        raise UsageError(f"{flag} points at PgBouncer's admin console (dbname=pgbouncer), not at "
                         "a database; give PostgreSQL's DSN, or PgBouncer's with your "
                         "database's name")
