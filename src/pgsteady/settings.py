"""Session settings, durations, and DSNs that are safe to print.

A DSN may carry a password; anything pgsteady prints or logs goes through :func:`redact`.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TypeAlias

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgsteady.errors import UsageError

Duration: TypeAlias = float | int | timedelta | None
"""Seconds as a number, or a ``timedelta``; ``None`` means no limit."""

_URL_PASSWORD = re.compile(r"^(postgres(?:ql)?://[^:/@]*:)([^@]*)(@)")
_TEXT_PASSWORDS = (
    re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE),
    re.compile(r"(postgres(?:ql)?://[^:/@\s]*:)([^@\s]*)(@)"),
)


def to_seconds(value: Duration, name: str = "duration") -> float | None:
    """Normalise a duration to float seconds; reject negatives with a clear message."""
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not seconds >= 0:  # also refuses NaN
        raise UsageError(f"{name} must be a non-negative duration, got {value!r}")
    return seconds


def redact(dsn: str) -> str:
    """Return ``dsn`` with any password replaced by ``***``; never raises."""
    if _URL_PASSWORD.match(dsn):
        return _URL_PASSWORD.sub(r"\1***\3", dsn)
    try:
        params = conninfo_to_dict(dsn)
    except Exception:  # an unparseable DSN may still hold a password: hide all of it
        return "<unparseable DSN>"
    if "password" in params:
        params["password"] = "***"  # noqa: S105 - the mask, not a password
        return make_conninfo("", **params)
    return dsn


def scrub(text: str) -> str:
    """Hide passwords anywhere in free text (error messages that quote a DSN)."""
    text = _TEXT_PASSWORDS[0].sub(r"\1***", text)
    return _TEXT_PASSWORDS[1].sub(r"\1***\3", text)


def pg_interval(seconds: float | None) -> str:
    """A duration as a PostgreSQL setting value in whole milliseconds; 0 means no limit."""
    if seconds is None:
        return "0"
    return f"{max(1, round(seconds * 1000))}ms"
