"""Warm-up for ``Steady``/``AsyncSteady``: the engine's connections opened before traffic.

SQLAlchemy's pool connects lazily: after a deploy or a restart, the first requests each pay
for a connection (TLS, authentication, PgBouncer's login, the session settings), and behind a
short deadline they time out (a 504 on the first request after start). ``warm_up`` checks
out ``count`` connections at once, so the pool opens that many, and gives them back: they
stay open in the pool, each already carrying its session settings (the engine's connect
events are the steady object's). A service calls it at start-up, before saying it is ready.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack, ExitStack
from typing import Any

from pgsteady.errors import CannotConnect
from pgsteady.settings import scrub


def _failed(what: str, url: Any, number: int, count: int, exc: BaseException) -> CannotConnect:
    reason = scrub(" ".join(str(getattr(exc, "orig", None) or exc).split()))[:300]
    where = url.render_as_string(hide_password=True)
    return CannotConnect(f"{what}.warm_up: could not open connection {number} of {count} to "
                         f"{where} ({reason or type(exc).__name__}); the pool keeps "
                         f"connecting on demand")


def _late(what: str, count: int, opened: int, timeout: float) -> CannotConnect:
    return CannotConnect(f"{what}.warm_up: {opened} of {count} connections opened within "
                         f"{timeout:g} s; the pool keeps connecting on demand")


def warm(engine: Any, count: int, timeout: float, what: str) -> int:
    """Open ``count`` connections of a sync ``engine``'s pool (held together, then given
    back); how many. CannotConnect when one fails or ``timeout`` passes first (each connect
    is bounded by the engine's connect_timeout)."""
    end = time.monotonic() + timeout
    with ExitStack() as held:
        for number in range(1, count + 1):
            if time.monotonic() >= end:
                raise _late(what, count, number - 1, timeout)
            try:
                held.enter_context(engine.connect())
            except Exception as exc:
                raise _failed(what, engine.url, number, count, exc) from None
    return count


async def awarm(engine: Any, count: int, timeout: float, what: str) -> int:
    """:func:`warm` for an ``AsyncEngine``."""
    end = time.monotonic() + timeout
    async with AsyncExitStack() as held:
        for number in range(1, count + 1):
            left = end - time.monotonic()
            if left <= 0:
                raise _late(what, count, number - 1, timeout)
            try:
                async with asyncio.timeout(left):
                    await held.enter_async_context(engine.connect())
            except TimeoutError:
                raise _late(what, count, number - 1, timeout) from None
            except Exception as exc:
                raise _failed(what, engine.url, number, count, exc) from None
    return count
