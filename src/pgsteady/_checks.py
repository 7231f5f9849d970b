"""Argument checks for public constructors: a wrong type or value becomes a one-line
UsageError naming the argument when the object is made, not a TypeError deep in a later call.
"""

from __future__ import annotations

from datetime import timedelta

from pgsteady.errors import UsageError
from pgsteady.settings import to_seconds


def whole(value: object, name: str, *, minimum: int = 1) -> int:
    """A whole number (not a bool, not a float) of at least ``minimum``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsageError(f"{name} must be a whole number, got {type(value).__name__} "
                         f"{value!r}")
    if value < minimum:
        raise UsageError(f"{name} must be at least {minimum}, got {value!r}")
    return value


def finite_seconds(value: object, name: str) -> float:
    """A positive, finite duration: seconds as a number or a ``timedelta``."""
    if not isinstance(value, int | float | timedelta) or isinstance(value, bool):
        raise UsageError(f"{name} must be seconds (a number) or a timedelta, got "
                         f"{type(value).__name__} {value!r}")
    seconds = to_seconds(value, name)
    if not seconds:  # 0, or None for infinity
        raise UsageError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return seconds


def fraction(value: object, name: str) -> float:
    """A number in (0, 1]."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value <= 1:
        raise UsageError(f"{name} must be a number in (0, 1], got {value!r}")
    return float(value)


def text(value: object, name: str) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value:
        raise UsageError(f"{name} must be a non-empty string, got {value!r}")
    return value


def exception_types(value: object, name: str) -> tuple[type[BaseException], ...]:
    """A tuple of exception classes (what ``except`` accepts)."""
    if not isinstance(value, tuple) or not all(
            isinstance(t, type) and issubclass(t, BaseException) for t in value):
        raise UsageError(f"{name} must be a tuple of exception classes, got {value!r}")
    return value
