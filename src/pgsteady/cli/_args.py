"""The command line's shared parsing: units (``50ms``, ``30@5s-10s``) and the DSN rule."""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass

from pgsteady.errors import UsageError
from pgsteady.settings import parse_duration


def duration(text: str) -> float:
    """:func:`pgsteady.settings.parse_duration` as an argparse type (its message, one line)."""
    try:
        return parse_duration(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def port(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return value


@dataclass(frozen=True)
class Burst:
    """Extra workers that join at ``start`` and leave at ``end`` (seconds into the run)."""

    workers: int
    start: float
    end: float


def burst(text: str) -> Burst:
    """``"30@5s-10s"``: 30 more workers from 5 s to 10 s; ``"0"`` means no burst."""
    if text.strip() in ("0", "none"):
        return Burst(0, 0.0, 0.0)
    m = re.match(r"^\s*(\d+)\s*@\s*([^-\s]+)\s*-\s*(\S+)\s*$", text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a burst; write it like 30@5s-10s (workers@start-end)")
    start, end = duration(m[2]), duration(m[3])
    if end <= start:
        raise argparse.ArgumentTypeError(f"burst {text!r} ends before it starts")
    return Burst(int(m[1]), start, end)


@dataclass(frozen=True)
class Stall:
    """Hold all proxy traffic for ``length`` seconds, once, at ``at`` seconds into the run."""

    length: float
    at: float


def stall(text: str) -> Stall:
    """``"100ms@7s"``."""
    m = re.match(r"^\s*([^@\s]+)\s*@\s*(\S+)\s*$", text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a stall; write it like 100ms@7s (length@when)")
    return Stall(duration(m[1]), duration(m[2]))


def dsn_from(args: argparse.Namespace) -> str | None:
    """The one DSN rule of every verb: ``--dsn`` (even empty), else ``PGSTEADY_DSN``; None when
    neither is set, and then libpq's ``PG*`` variables apply (connect with ``""``)."""
    if args.dsn is not None:
        return str(args.dsn)
    return os.environ.get("PGSTEADY_DSN")


def libpq_environment() -> bool:
    """Whether any of libpq's ``PG*`` variables is set (``PGSTEADY_DSN`` is not one)."""
    return any(k.startswith("PG") and k != "PGSTEADY_DSN" for k in os.environ)

