"""Argument checks for public constructors: a wrong type or value becomes a one-line
UsageError naming the argument when the object is made, not a TypeError deep in a later call.
"""

from __future__ import annotations

import inspect
from datetime import timedelta
from typing import Any

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


def breaker(value: object, name: str = "breaker") -> None:
    """None or a :class:`~pgsteady.guards.breaker.CircuitBreaker` (checked by its methods, so
    that a breaker of one's own with the same face passes)."""
    if value is not None and not all(callable(getattr(value, method, None))
                                     for method in ("guard", "aguard", "after_fork")):
        raise UsageError(f"{name} must be a CircuitBreaker (pgsteady.guards) or None, got "
                         f"{type(value).__name__} {value!r}")


def job_function(fn: Any, what: str, *, wants_async: bool) -> None:
    """What ``run(fn)`` takes: a function of one argument, ``async def`` exactly when the
    executor awaits it. A string (``run("select 1")``) or the other kind fails here, in one
    line, instead of as a TypeError inside the job (or an un-awaited coroutine returned)."""
    if not callable(fn):
        hint = "; for one statement use execute/fetchone" if isinstance(fn, str | bytes) else ""
        takes = "session" if what.endswith("Steady") else "connection"
        raise UsageError(f"{what}.run needs a function of the {takes}, got "
                         f"{type(fn).__name__} {fn!r:.60}{hint}")
    name = getattr(fn, "__name__", repr(fn))
    if inspect.iscoroutinefunction(fn) and not wants_async:
        raise UsageError(f"{what}.run got an async function ({name}); use a plain def here, "
                         f"or the async executor")
    # A plain ``def`` (not a lambda, which may well return a coroutine) given to the async
    # executor would fail inside the job at ``await``: say so now.
    if wants_async and inspect.isfunction(fn) and name != "<lambda>" and \
            not inspect.iscoroutinefunction(fn) and not inspect.isasyncgenfunction(fn):
        raise UsageError(f"{what}.run needs an async function (async def {name}(...)), got a "
                         f"plain def; use the sync executor for it")
