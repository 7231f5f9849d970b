"""``CircuitBreaker``: stop calling a dependency that keeps failing, and fail at once instead.

In seed 002 every uncached gateway request waited about 10 seconds for a database that did
not answer. A breaker that has seen most calls in its window fail (or time out) opens: calls
then raise :class:`CircuitOpen` in microseconds, without touching anything, until
``open_for`` has passed; then ``half_open_calls`` trial calls go through, and their outcome
closes the breaker again or re-opens it.

States: ``closed`` ──(failure rate ≥ failure_rate over ≥ min_calls in window)──► ``open``
──(open_for passed)──► ``half-open`` ──(all trials succeed)──► ``closed`` (any trial fails:
back to ``open``). ``consecutive_failures=n`` also opens it after n failures in a row,
whatever the rate: a store whose timeout already means "not answering" (Redis) opens on the
first. Thread-safe; the asyncio form (``acall``) shares the same state, so one
breaker can guard sync and async callers alike. Nothing here blocks while holding its lock.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, TypeVar

from pgsteady import _checks
from pgsteady.errors import CircuitOpen

log = logging.getLogger("pgsteady.guards")

T = TypeVar("T")
BreakerState = Literal["closed", "open", "half-open"]
Verdict = Literal["failure", "success", "neutral"]

# One entry per ``with breaker:`` block still open in this thread/task: its ticket.
WINDOW_BUCKETS = 10
"""The sliding window moves in steps of window / WINDOW_BUCKETS."""

_TICKETS: contextvars.ContextVar[tuple[int, ...]] = contextvars.ContextVar(
    "pgsteady_breaker_tickets", default=())


@dataclass(frozen=True)
class BreakerStats:
    """A snapshot: the state, the window's calls and failures, and counters since creation."""

    name: str
    state: BreakerState
    window_calls: int
    window_failures: int
    calls: int
    failures: int
    rejected: int
    opened: int
    half_opened: int
    closed: int
    retry_after: float


class CircuitBreaker:
    """A circuit breaker over a sliding time window of ``window`` seconds.

    ``failure_on`` lists the exceptions that count as failures in ``with breaker:`` and
    ``call``; other exceptions pass through and count as successes (the dependency answered).
    ``Database(..., breaker=...)`` classifies its own outcomes instead (see
    :func:`pgsteady._core.breaker_verdict`). ``consecutive_failures`` (default: off) opens
    it after that many failures in a row even when earlier successes keep the rate low.
    """

    def __init__(self, name: str, *, failure_rate: float = 0.5, min_calls: int = 10,
                 window: float | timedelta = 30.0,
                 open_for: float | timedelta = 5.0, half_open_calls: int = 1,
                 failure_on: tuple[type[BaseException], ...] = (Exception,),
                 consecutive_failures: int | None = None) -> None:
        self.name = _checks.text(name, "CircuitBreaker name")
        self.failure_rate = _checks.fraction(failure_rate, "failure_rate")
        self.min_calls = _checks.whole(min_calls, "min_calls")
        self.window = _checks.finite_seconds(window, "window")
        self.open_for = _checks.finite_seconds(open_for, "open_for")
        self.half_open_calls = _checks.whole(half_open_calls, "half_open_calls")
        self.failure_on = _checks.exception_types(failure_on, "failure_on")
        self.consecutive_failures = None if consecutive_failures is None else _checks.whole(
            consecutive_failures, "consecutive_failures")
        self._streak = 0  # failures in a row while closed
        self._lock = threading.Lock()
        # The window as WINDOW_BUCKETS time buckets [start, calls, failures]: memory stays
        # bounded however many calls a second go through (resilience4j does the same).
        self._bucket_width = self.window / WINDOW_BUCKETS
        self._buckets: deque[list[float]] = deque()
        self._calls_in_window = 0
        self._failures_in_window = 0
        self._state: BreakerState = "closed"
        self._opened_at = 0.0
        self._epoch = 0  # bumped on every state change; tickets from old epochs are ignored
        self._trials = 0  # half-open trial calls let through
        self._trial_successes = 0
        self._calls = self._failures = self._rejected = 0
        self._transitions = {"open": 0, "half-open": 0, "closed": 0}

    # -- state -------------------------------------------------------------------------

    @property
    def state(self) -> BreakerState:
        with self._lock:
            self._tick(time.monotonic())
            return self._state

    def stats(self) -> BreakerStats:
        with self._lock:
            now = time.monotonic()
            self._tick(now)
            self._prune(now)
            return BreakerStats(
                self.name, self._state, self._calls_in_window, self._failures_in_window,
                self._calls, self._failures, self._rejected, self._transitions["open"],
                self._transitions["half-open"], self._transitions["closed"],
                self._retry_after(now))

    def _retry_after(self, now: float) -> float:
        if self._state != "open":
            return 0.0
        return max(0.0, self._opened_at + self.open_for - now)

    def _move(self, state: BreakerState, now: float) -> None:
        previous, self._state = self._state, state
        self._epoch += 1
        self._transitions[state] += 1
        if state == "open" and previous == "half-open":
            # The same outage going on: one warning when it began, not one per probe.
            self._opened_at = now
            log.info("circuit %r half-open -> open (the trial call failed); failing fast "
                     "for %.1f s more", self.name, self.open_for)
        elif state == "open":
            self._opened_at = now
            log.warning("circuit %r %s -> open (%d of %d calls failed in %.0f s); failing "
                        "fast for %.1f s", self.name, previous, self._failures_in_window,
                        self._calls_in_window, self.window, self.open_for)
        else:
            log.info("circuit %r %s -> %s", self.name, previous, state)
        if state != "open":
            self._trials = self._trial_successes = 0
        if state == "closed":
            self._streak = 0
            self._buckets.clear()
            self._calls_in_window = self._failures_in_window = 0

    def _tick(self, now: float) -> None:
        if self._state == "open" and now >= self._opened_at + self.open_for:
            self._move("half-open", now)

    def _prune(self, now: float) -> None:
        horizon = now - self.window
        while self._buckets and self._buckets[0][0] + self._bucket_width <= horizon:
            _, calls, failures = self._buckets.popleft()
            self._calls_in_window -= int(calls)
            self._failures_in_window -= int(failures)

    # -- the protocol: allow, then settle with a verdict -----------------------------------

    def allow(self) -> int:
        """Let one call through and return its ticket, or raise :class:`CircuitOpen`."""
        now = time.monotonic()
        with self._lock:
            self._tick(now)
            if self._state == "closed":
                return self._epoch
            if self._state == "half-open" and self._trials < self.half_open_calls:
                self._trials += 1
                return self._epoch
            self._rejected += 1
            retry_after = self._retry_after(now) if self._state == "open" else 0.0
        raise CircuitOpen(self.name, retry_after)

    def settle(self, ticket: int, verdict: Verdict) -> None:
        """Record how the call let through with ``ticket`` ended."""
        now = time.monotonic()
        with self._lock:
            if verdict != "neutral":
                self._calls += 1
                self._failures += verdict == "failure"
            if ticket != self._epoch:
                return  # the state changed while it ran: it says nothing about the new one
            if self._state == "half-open":
                if verdict == "failure":
                    self._move("open", now)
                elif verdict == "success":
                    self._trial_successes += 1
                    if self._trial_successes >= self.half_open_calls:
                        self._move("closed", now)
                else:
                    self._trials -= 1  # a neutral trial frees its place for another
                return
            if self._state != "closed" or verdict == "neutral":
                return
            failed = verdict == "failure"
            if not self._buckets or now >= self._buckets[-1][0] + self._bucket_width:
                self._buckets.append([now, 0, 0])
            bucket = self._buckets[-1]
            bucket[1] += 1
            bucket[2] += failed
            self._calls_in_window += 1
            self._failures_in_window += failed
            self._prune(now)
            self._streak = self._streak + 1 if failed else 0
            total = self._calls_in_window
            by_rate = total >= self.min_calls \
                and self._failures_in_window >= self.failure_rate * total
            in_a_row = self.consecutive_failures is not None \
                and self._streak >= self.consecutive_failures
            if failed and (by_rate or in_a_row):
                self._move("open", now)

    def verdict_of(self, exc: BaseException | None) -> Verdict:
        """How ``with breaker:`` and ``call`` classify an outcome: ``failure_on`` fails."""
        if exc is None:
            return "success"
        if isinstance(exc, CircuitOpen) and exc.name == self.name:
            return "neutral"
        if isinstance(exc, self.failure_on):
            return "failure"
        return "success" if isinstance(exc, Exception) else "neutral"

    def after_fork(self) -> None:
        """In a forked child (the executors call this): a fresh lock, as the parent's may be
        held by a thread that does not exist here, and a fresh window: the child's calls are
        its own."""
        self._lock = threading.Lock()
        self._buckets.clear()
        self._calls_in_window = self._failures_in_window = self._streak = 0
        self._state, self._trials, self._trial_successes = "closed", 0, 0
        self._epoch += 1

    def reset(self) -> None:
        """Close the breaker and forget its window (an operator's override)."""
        with self._lock:
            if self._state != "closed":
                self._move("closed", time.monotonic())

    # -- ways to use it ---------------------------------------------------------------------

    def __enter__(self) -> CircuitBreaker:
        ticket = self.allow()
        _TICKETS.set((*_TICKETS.get(), ticket))
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        tickets = _TICKETS.get()
        _TICKETS.set(tickets[:-1])
        self.settle(tickets[-1], self.verdict_of(exc))

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` through the breaker."""
        return self.guard(lambda: fn(*args, **kwargs), self.verdict_of)

    async def acall(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """``await fn(*args, **kwargs)`` through the breaker."""
        return await self.aguard(lambda: fn(*args, **kwargs), self.verdict_of)

    def guard(self, fn: Callable[[], T], verdict: Callable[[BaseException | None], Verdict]) -> T:
        """``fn()`` through the breaker, its outcome classified by ``verdict``."""
        ticket = self.allow()
        try:
            result = fn()
        except BaseException as exc:
            self.settle(ticket, verdict(exc))
            raise
        self.settle(ticket, verdict(None))
        return result

    async def aguard(self, fn: Callable[[], Awaitable[T]],
                     verdict: Callable[[BaseException | None], Verdict]) -> T:
        """``await fn()`` through the breaker; cancellation counts as neutral."""
        ticket = self.allow()
        try:
            result = await fn()
        except BaseException as exc:
            self.settle(ticket, verdict(exc))
            raise
        self.settle(ticket, verdict(None))
        return result

    def __repr__(self) -> str:
        return f"<CircuitBreaker {self.name!r} {self.state}>"
