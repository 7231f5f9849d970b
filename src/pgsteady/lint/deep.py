"""Running a function on a statement nested deeper than Python's default stack allows."""

from __future__ import annotations

import sys
import threading

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_DEEP_STACK = 512 * 1024 * 1024
_DEEP_RECURSION = 200_000


def deep_call(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` on a thread with a 512 MB stack and a high recursion limit.

    For statements nested deeper than Python's default limit allows (a couple of hundred
    ``CASE``, long ``||`` chains). Returns None if even that is not deep enough.
    """
    result: list[Any] = []

    def run() -> None:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(_DEEP_RECURSION)
        try:
            result.append(function(*args))
        except RecursionError:
            pass
        finally:
            sys.setrecursionlimit(limit)

    size = threading.stack_size(_DEEP_STACK)
    try:
        worker = threading.Thread(target=run, name="pgsteady-lint-deep")
        worker.start()
        worker.join()
    finally:
        threading.stack_size(size)
    return result[0] if result else None
