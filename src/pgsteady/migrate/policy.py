"""The policy of a migration run and its retries: timeouts per try (the lock_timeout doubling
from 100 ms to a cap, as GitLab's ``with_lock_retries``), jittered waits within a retry budget
that never restarts, and the records a run reports (:class:`Attempt`, :class:`Applied`).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import psycopg
from psycopg.errors import DeadlockDetected, LockNotAvailable

from pgsteady.errors import MigrationBlocked, UsageError
from pgsteady.migrate import preflight
from pgsteady.settings import (
    scrub,
)

if TYPE_CHECKING:  # the analysis (pglast's trees) is imported when a statement needs it
    pass

log = logging.getLogger("pgsteady.migrate")

T = TypeVar("T")
RETRYABLE = (LockNotAvailable, DeadlockDetected)
MIN_LOCK_TIMEOUT = 0.02  # a try with less time than this left is not worth starting
LOGGED_QUERY_CHARS = 80


@dataclass(frozen=True)
class Policy:
    """How long a migration may wait, and how it retries. Durations are seconds.

    ``lock_timeout`` is the cap of the escalating schedule that starts at
    ``first_lock_timeout``; ``retry_budget`` bounds all tries and waits of one migration, and
    the clock never restarts on retry.
    """

    lock_timeout: float = 5.0
    first_lock_timeout: float = 0.1
    statement_timeout: float = 60.0
    index_statement_timeout: float = 3600.0  # no-transaction statements build whole indexes
    retries: int = 10
    retry_budget: float = 120.0
    first_wait: float = 0.1
    max_wait: float = 5.0
    runner_wait: float = 10.0
    blocker_age: float = 1.0  # preflight: ignore lock holders younger than this
    history_schema: str = "public"
    history_table: str = ""  # "": the tool's own (pgsteady_migrations, goose_db_version, ...)
    allow_out_of_order: bool = False

    def __post_init__(self) -> None:
        for name in ("lock_timeout", "first_lock_timeout", "statement_timeout",
                     "index_statement_timeout", "retry_budget", "first_wait", "max_wait",
                     "runner_wait", "blocker_age"):
            value = getattr(self, name)
            if not value >= 0:
                raise UsageError(f"{name} must be a non-negative number of seconds, "
                                 f"got {value!r}")
        if self.lock_timeout <= 0:
            raise UsageError("lock_timeout must be above 0: without it a blocked migration "
                             "stalls every query on its table; pass e.g. 5s")
        if self.retries < 0:
            raise UsageError(f"retries must be 0 or more, got {self.retries!r}")

    def lock_timeout_for(self, attempt: int) -> float:
        """The lock_timeout of try ``attempt`` (1-based): doubling from the first to the cap."""
        first = min(self.first_lock_timeout or self.lock_timeout, self.lock_timeout)
        return min(self.lock_timeout, math.ldexp(first, attempt - 1))

    def wait_before(self, attempt: int) -> float:
        """Jittered pause before try ``attempt`` (2+): half to all of a doubling step."""
        step = min(self.max_wait, math.ldexp(self.first_wait, max(0, attempt - 2)))
        return step * random.uniform(0.5, 1.0)


@dataclass(frozen=True)
class Attempt:
    number: int
    lock_timeout: float


@dataclass(frozen=True)
class Applied:
    """A migration that committed."""

    version: int
    name: str
    tries: int
    seconds: float
    tag: str = ""  # the version as the tool writes it (Flyway's 1.1, Diesel's 00000000000000)


def pg_error(exc: BaseException) -> BaseException | None:
    """The psycopg error behind ``exc`` (itself, SQLAlchemy's ``.orig``, or the cause)."""
    for candidate in (exc, getattr(exc, "orig", None), getattr(exc, "cause", None),
                      exc.__cause__):
        if isinstance(candidate, psycopg.Error):
            return candidate
    return None


def describe_pg_error(error: BaseException) -> str:
    """``SQLSTATE message; DETAIL: ...; HINT: ...`` in one line, secrets scrubbed."""
    sqlstate = getattr(error, "sqlstate", None) or "error"
    text = f"{sqlstate} {first_line(error)}"
    diag = getattr(error, "diag", None)
    for label, value in (("DETAIL", getattr(diag, "message_detail", None)),
                         ("HINT", getattr(diag, "message_hint", None))):
        if value:
            text += f"; {label}: {scrub(' '.join(value.split()))}"
    return text


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return scrub(text.splitlines()[0]) if text else type(exc).__name__


def with_lock_retries(
    try_once: Callable[[Attempt], T], policy: Policy, *, what: str,
    name_blockers: Callable[[BaseException], list[preflight.Blocker]] | None = None,
    failed_try: BaseException | None = None, started: float | None = None,
) -> tuple[T, int]:
    """Run ``try_once`` until it gets its locks, within ``policy``'s tries and budget.

    ``try_once`` must roll back everything it did when it raises. Only lock failures
    (55P03, 40P01) are retried; anything else propagates at once. Returns (result, tries).
    ``failed_try``: the first try was made elsewhere (several migrations in one message) and
    failed with it, begun at ``started``: it is logged and named here, the schedule goes on
    from the second try, and the budget counts from ``started``, so the clock never restarts.
    """
    start = time.monotonic() if started is None else started
    deadline = start + policy.retry_budget
    last: BaseException | None = None
    blockers: list[preflight.Blocker] = []
    tries = 0
    for number in range(1, policy.retries + 2):
        if number > 1:
            wait = min(policy.wait_before(number), deadline - time.monotonic() - MIN_LOCK_TIMEOUT)
            if wait < 0:
                break
            time.sleep(wait)
        remaining = deadline - time.monotonic()
        if number > 1 and remaining < MIN_LOCK_TIMEOUT:
            break
        lock_timeout = max(MIN_LOCK_TIMEOUT, min(policy.lock_timeout_for(number), remaining))
        tries = number
        if number == 1 and failed_try is not None:
            if not isinstance(pg_error(failed_try), RETRYABLE):
                raise failed_try
            last, lock_timeout = failed_try, first_lock_timeout(policy)
        else:
            try:
                return try_once(Attempt(number, lock_timeout)), number
            except Exception as exc:
                if not isinstance(pg_error(exc), RETRYABLE):
                    raise
                last = exc
        seen = _safe_blockers(name_blockers, last)
        log.warning("%s: try %d could not get its locks within lock_timeout %.0f ms (%s); "
                    "blocked by: %s", what, number, lock_timeout * 1000,
                    type(pg_error(last)).__name__,
                    "; ".join(b.describe(query_chars=LOGGED_QUERY_CHARS) for b in seen)
                    or "(gone before it was seen)")
        # The error names the sessions last seen in the way: a try too short for the watch
        # to look (a slow host, a short lock_timeout) keeps what an earlier try saw.
        blockers = seen or blockers
    spent = time.monotonic() - start
    named = "; ".join(b.describe() for b in blockers) or \
        "a session not identified (it may have ended)"
    raise MigrationBlocked(
        f"{what}: could not get its locks in {tries} tries over {spent:.1f}s (retry budget "
        f"{policy.retry_budget:g}s, lock_timeout up to {policy.lock_timeout:g}s); nothing of it "
        f"was applied. Blocked by: {named}. Wait for it, or end it with "
        f"pg_terminate_backend(pid), then run again") from last


def first_lock_timeout(policy: Policy) -> float:
    """The lock_timeout of a first try (what :func:`with_lock_retries` gives try 1)."""
    return max(MIN_LOCK_TIMEOUT, min(policy.lock_timeout_for(1), policy.retry_budget))


def _safe_blockers(name_blockers: Callable[[BaseException], list[preflight.Blocker]] | None,
                   exc: BaseException) -> list[preflight.Blocker]:
    """Naming the blocker is best effort: it must never hide the lock failure itself."""
    if name_blockers is None:
        return []
    try:
        return name_blockers(exc)
    except Exception:
        log.debug("could not look up the blocking sessions", exc_info=True)
        return []

