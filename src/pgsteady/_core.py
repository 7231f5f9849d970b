"""The decisions both runners share: admitting a job, dropping it, and counting how it ended.

``runner.Database`` (threads) and ``arunner.AsyncDatabase`` (asyncio) are thin I/O shells
around this module: every rule about deadlines, the bounded backlog and the stats lives here
once, so the two cannot drift apart. Nothing here blocks or does I/O; the sync shell calls it
under its lock, the async shell from its event loop.

A job's life::

    admit ──► QUEUED ──► CONNECTING ──► RUNNING ──► DONE      (answered / abandoned / failed)
                │            │
                └────────────┴──► DROPPED                     (its caller gave up first: the
                                                               database never saw it)

The point of no return is the step to RUNNING, taken only with a connection in hand and the
caller still waiting. After it, the query runs to completion on its connection even if the
caller leaves: a deadline ends a wait, never a query, and never closes a connection.

If the connection breaks under a RUNNING job, what the job had sent decides the error: before
a statement that commits on its own (autocommit) or a COMMIT was sent, PostgreSQL rolled it
back (``QueryFailed``, safe to retry); after, it may have committed (``OutcomeUnknown``).
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import psycopg

from pgsteady import _direct
from pgsteady._outcome import pooler_refusal
from pgsteady.errors import (
    CannotConnect,
    DatabaseClosed,
    DeadlineExceeded,
    OutcomeUnknown,
    Overloaded,
    Phase,
    QueryFailed,
    UsageError,
)
from pgsteady.guards.breaker import CircuitBreaker, Verdict
from pgsteady.settings import (
    Duration,
    describe,
    to_seconds,
)

log = logging.getLogger("pgsteady.runner")

T = TypeVar("T")


class Lendable(Protocol):
    """A worker's slot as :meth:`Core.lend` sees it: the connection it holds between jobs,
    how many jobs that connection ran, and whether a caller has it now."""

    conn: Any
    turns: int
    lent: bool


S = TypeVar("S", bound=Lendable)


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Any = _Default()
"""Use the executor's default deadline."""

KEEP_CONNECTION_FOR = 256
"""A worker runs up to this many jobs on the connection it holds before handing it back to
the pool (which then gets its chance to check, reset or retire it)."""

HOLD_IDLE = 0.5
"""Seconds a worker keeps its connection while no job comes, before giving it back."""

IDLE_POLL = 1.0
"""A worker without a connection re-checks for shutdown at least this often."""

MAX_DEADLINE = threading.TIMEOUT_MAX
"""The longest finite deadline a caller can wait (~292 years); ``None`` or infinity: none."""

class State(enum.IntEnum):
    QUEUED = 0
    CONNECTING = 1
    RUNNING = 2
    DONE = 3
    DROPPED = 4


@dataclass(eq=False, slots=True)
class Job:
    """One unit of work and its caller's deadline (absolute, ``time.monotonic()``)."""

    work: Callable[[Any, Job], Any]  # work(conn, job)
    budget: float | None
    submitted: float
    deadline: float | None
    state: State = State.QUEUED
    abandoned: bool = False
    result: Any = None
    error: BaseException | None = None
    waker: Any = None  # the shell's completion signal: a Lock (threads) or a Future (asyncio)
    dropped_in: Phase = "queued"  # where a DROPPED job was when its deadline passed
    commit_sent: bool = False
    """Set by the work just before it sends a statement that commits on its own or a COMMIT:
    from then on, a broken connection leaves the outcome unknown."""

    def remaining(self, now: float) -> float | None:
        return None if self.deadline is None else self.deadline - now


@dataclass(frozen=True)
class DatabaseStats:
    """A snapshot of a Database. After all jobs have ended, ``accepted`` equals
    ``answered + dropped_before_start + abandoned_completions + failed``. ``outcome_unknown``
    counts the failed jobs that may have been applied (``OutcomeUnknown``), including those
    whose caller had already left with ``DeadlineExceeded`` (each of those is also logged)."""

    pool_size: int
    connections_in_use: int
    queued: int
    running: int
    accepted: int
    answered: int
    deadline_exceeded_queued: int
    deadline_exceeded_connecting: int
    deadline_exceeded_running: int
    dropped_before_start: int
    abandoned_completions: int
    overloaded: int
    failed: int
    closed: bool = False
    outcome_unknown: int = 0
    interrupted: int = 0
    """Of the deadlines exceeded, those that were an exception raised into the caller's wait
    (a signal handler's, Celery's soft time limit, Ctrl-C, a cancelled task): the caller
    left; its job was dropped if not started, or completed without it."""

    @property
    def deadline_exceeded(self) -> int:
        return (self.deadline_exceeded_queued + self.deadline_exceeded_connecting
                + self.deadline_exceeded_running)

    @property
    def in_flight(self) -> int:
        return self.accepted - (self.answered + self.dropped_before_start
                                + self.abandoned_completions + self.failed)


@dataclass
class Core:
    """Backlog and bookkeeping; the caller provides mutual exclusion."""

    pool_size: int
    max_waiting: int
    waiting: deque[Job] = field(default_factory=deque)
    opened: bool = False
    closed: bool = False
    held: int = 0  # connections workers hold between jobs
    connecting: int = 0
    running: int = 0
    accepted: int = 0
    answered: int = 0
    exceeded: dict[str, int] = field(
        default_factory=lambda: {"queued": 0, "connecting": 0, "running": 0})
    dropped_before_start: int = 0
    abandoned_completions: int = 0
    overloaded: int = 0
    failed: int = 0
    outcome_unknown: int = 0
    interrupted: int = 0
    kind: str = "Database"  # what the caller holds, as its errors name it

    def admit(self, job: Job) -> None:
        """Queue ``job`` or refuse it at once: the backlog never grows past ``max_waiting``."""
        if self.closed:
            raise DatabaseClosed(f"the {self.kind} is closed; create a new one")
        if not self.opened:
            raise DatabaseClosed(f"the {self.kind} is not open yet; call open() first "
                                 "(or use it as a context manager)")
        if len(self.waiting) >= self.max_waiting:
            self.overloaded += 1
            raise Overloaded(len(self.waiting), self.max_waiting)
        self.accepted += 1
        self.waiting.append(job)

    def can_start(self) -> bool:
        """Whether a job may skip the backlog now (:meth:`start`): open, and nobody queued."""
        return self.opened and not self.closed and not self.waiting

    def lend(self, idle_holding: list[S], job: Job) -> S | None:
        """An idle worker's slot whose connection ``job``'s caller runs it on
        (``pgsteady._direct``), ``job`` started; None if a job is queued (no overtaking), no
        worker idles holding a connection, or the deadline has passed (the hand-off then drops
        the job unsent). Under the executor's lock."""
        if not idle_holding or not self.can_start():
            return None
        if job.deadline is not None and time.monotonic() >= job.deadline:
            return None
        slot = idle_holding.pop()
        slot.lent = True
        self.start(job)
        return slot

    def returned(self, slot: Lendable, job: Job, result: Any,
                 error: BaseException | None) -> bool:
        """The caller's statement on ``slot``'s connection ended: record it, and give the
        slot back. True if its worker must wake (a queued job, closing, a connection to
        retire); else the slot idles again and the caller lists it. Under the lock."""
        self.finish(job, result, error)
        slot.lent = False
        slot.turns += 1
        return bool(self.waiting or self.closed or not _direct.ready(slot.conn)
                    or slot.turns >= KEEP_CONNECTION_FOR)

    def start(self, job: Job) -> None:
        """Accept ``job`` straight into RUNNING: its caller holds an idle connection and runs
        it at once (``pgsteady._direct``), the backlog being empty."""
        self.accepted += 1
        self.running += 1
        job.state = State.RUNNING

    def close(self) -> list[Job]:
        """Refuse new jobs; end the queued ones with :class:`DatabaseClosed`."""
        self.closed = True
        pending = list(self.waiting)
        self.waiting.clear()
        for job in pending:
            job.state = State.DONE
            job.error = DatabaseClosed("the Database was closed before this job started")
            self.dropped_before_start += 1
        return pending

    def take(self) -> Job | None:
        """The next job for a worker, or None if there is none."""
        if not self.waiting:
            return None
        job = self.waiting.popleft()
        job.state = State.CONNECTING
        self.connecting += 1
        return job

    def begin(self, job: Job, now: float) -> bool:
        """A worker holds a connection for ``job``: run it, unless its caller is gone or its
        deadline has already passed (then drop it; the database never sees it)."""
        self.connecting -= 1
        if job.abandoned or (job.deadline is not None and now >= job.deadline):
            job.state = State.DROPPED
            self.dropped_before_start += 1
            return False
        job.state = State.RUNNING
        self.running += 1
        return True

    def no_connection(self, job: Job, error: BaseException) -> None:
        """The worker could not get a connection for ``job`` in time."""
        self.connecting -= 1
        if job.abandoned or (job.deadline is not None and time.monotonic() >= job.deadline):
            job.state = State.DROPPED
            job.dropped_in = "connecting"  # its deadline ended the wait for a connection
            self.dropped_before_start += 1
        else:
            job.state = State.DONE
            job.error = error
            self.failed += 1

    def finish(self, job: Job, result: Any, error: BaseException | None) -> None:
        """A started job ended; classify it once."""
        self.running -= 1
        job.state = State.DONE
        job.result, job.error = result, error
        if error is not None:
            self.failed += 1
            if isinstance(error, OutcomeUnknown):
                self.outcome_unknown += 1
                if job.abandoned:  # its caller left at the deadline and will never hear of it
                    log.warning("a job whose caller gave up at its deadline lost its "
                                "connection after its statement or COMMIT was sent; it may "
                                "have been applied: %s", describe(error.__cause__ or error))
        elif job.abandoned:
            self.abandoned_completions += 1
        else:
            self.answered += 1

    def give_up(self, job: Job, now: float,
                interrupted: bool = False) -> DeadlineExceeded | None:
        """The caller's deadline passed, or (``interrupted``) an exception raised into its
        wait made it leave: either way its job is dropped if not started, and completes
        without it if started. Returns the error to raise, or None if the job finished in the
        meantime (the caller then takes its outcome)."""
        if job.state == State.DONE:
            return None
        job.abandoned = True
        self.interrupted += interrupted
        phase: Phase
        if job.state == State.QUEUED:
            self.waiting.remove(job)  # O(max_waiting): the backlog is small and bounded
            job.state = State.DROPPED
            self.dropped_before_start += 1
            phase = "queued"
        elif job.state == State.DROPPED:
            phase = job.dropped_in
        elif job.state == State.CONNECTING:
            phase = "connecting"
        else:
            phase = "running"
        self.exceeded[phase] += 1
        return DeadlineExceeded(phase, job.budget or 0.0, now - job.submitted)

    def outcome(self, job: Job, now: float) -> Any:
        """What the caller gets for a job that ended while it waited."""
        if job.state == State.DROPPED:  # a worker found it past its deadline
            if not job.abandoned:  # give_up() has not counted it already
                self.exceeded[job.dropped_in] += 1
            raise DeadlineExceeded(job.dropped_in, job.budget or 0.0, now - job.submitted)
        if job.error is not None:
            raise job.error
        return job.result

    def fresh(self) -> Core:
        """A forked child's counts: none yet, open or closed as its parent's executor was."""
        core = Core(self.pool_size, self.max_waiting, kind=self.kind)
        core.opened, core.closed = self.opened, self.closed
        return core

    def snapshot(self) -> DatabaseStats:
        return DatabaseStats(
            pool_size=self.pool_size, connections_in_use=self.running,
            queued=len(self.waiting), running=self.running, accepted=self.accepted,
            answered=self.answered, deadline_exceeded_queued=self.exceeded["queued"],
            deadline_exceeded_connecting=self.exceeded["connecting"],
            deadline_exceeded_running=self.exceeded["running"],
            dropped_before_start=self.dropped_before_start,
            abandoned_completions=self.abandoned_completions, overloaded=self.overloaded,
            failed=self.failed, closed=self.closed, outcome_unknown=self.outcome_unknown,
            interrupted=self.interrupted,
        )


def new_job(work: Callable[[Any, Job], Any], deadline: Duration,
            default: float | None) -> Job:
    """A job for ``work`` and its caller's deadline, taken once as an absolute instant
    (``DEFAULT``: the executor's own); checked before anything is queued."""
    budget = default if deadline is DEFAULT else deadline_of(deadline)
    now = time.monotonic()
    return Job(work, budget, now, None if budget is None else now + budget)


_UNGUARDED = object()
_LEFT: contextvars.ContextVar[object] = contextvars.ContextVar("pgsteady_left", default=_UNGUARDED)
"""Within a guarded call: the exception its caller left with, raised into its wait."""


def caller_left(exc: BaseException) -> None:
    """``exc`` was raised into the caller's wait (a signal handler's, a soft time limit): its
    breaker counts the call as neutral, as a cancelled one — the database said nothing."""
    if _LEFT.get() is not _UNGUARDED:
        _LEFT.set(exc)


def direct_failure(exc: BaseException, handed: bool, job: Job,
                   broken: bool) -> BaseException | None:
    """What a statement its caller ran on a borrowed connection (``pgsteady._direct``) and
    that raised ``exc`` leaves to record: None if the caller left mid-wait (the worker has the
    statement; its breaker counts the call neutral), else the job's error (:func:`wrap_error`)."""
    if handed:
        caller_left(exc)
        return None
    return wrap_error(exc, job, broken)


def _verdict(exc: BaseException | None) -> Verdict:
    if exc is not None and exc is _LEFT.get():
        return "neutral"
    return breaker_verdict(exc)


def guard(breaker: CircuitBreaker, call: Callable[[], T]) -> T:
    """``call()`` through an executor's breaker, its outcomes judged by :func:`breaker_verdict`."""
    token = _LEFT.set(None)
    try:
        return breaker.guard(call, _verdict)
    finally:
        _LEFT.reset(token)


async def aguard(breaker: CircuitBreaker, call: Callable[[], Awaitable[T]]) -> T:
    """The asyncio form of :func:`guard`."""
    token = _LEFT.set(None)
    try:
        return await breaker.aguard(call, _verdict)
    finally:
        _LEFT.reset(token)


def wait_for_outcome_in_thread(core: Core, job: Job, lock: Any) -> Any:
    """The caller's side of an admitted ``job`` whose ``waker`` is an acquired
    ``threading.Lock`` its runner releases: wait until the outcome or the deadline. An
    exception raised into the wait (a signal handler's, Ctrl-C) is the caller leaving, as at
    its deadline. ``lock`` guards ``core``. Database and Steady both wait this way."""
    try:
        answered = job.waker.acquire(timeout=-1 if job.budget is None else job.budget)
    except BaseException as exc:
        with lock:
            core.give_up(job, time.monotonic(), interrupted=True)
        caller_left(exc)
        raise
    with lock:
        if answered:
            return core.outcome(job, time.monotonic())
        error = core.give_up(job, time.monotonic())
        if error is None:  # it ended just now: take its outcome
            return core.outcome(job, time.monotonic())
    raise error


async def wait_for_outcome(core: Core, job: Job, lock: Any = None) -> Any:
    """The asyncio form of :func:`wait_for_outcome_in_thread` (``job.waker`` a future; one
    event loop needs no ``lock``). A cancelled caller leaves too. AsyncDatabase and
    AsyncSteady both wait this way."""
    loop = asyncio.get_running_loop()
    timer = None if job.budget is None else loop.call_later(job.budget, _expire, core, job)
    try:
        await job.waker
    except BaseException as exc:
        # The deadline's own error is the waker's and has counted itself already.
        if not (job.waker.done() and not job.waker.cancelled()
                and job.waker.exception() is exc):
            core.give_up(job, time.monotonic(), interrupted=True)
            caller_left(exc)
        raise
    finally:
        if timer is not None:
            timer.cancel()
    return core.outcome(job, time.monotonic())


def _expire(core: Core, job: Job) -> None:
    error = core.give_up(job, time.monotonic())
    if error is not None and not job.waker.done():
        job.waker.set_exception(error)


# SQLSTATE classes that mean the connection itself failed (not the caller's statement).
_CONNECTION_FAILURE_CLASSES = ("08", "57P")


def wrap_error(exc: BaseException, job: Job, broken: bool) -> BaseException:
    """The error a caller sees: the statement's own errors unchanged (a unique violation, a
    wrong placeholder count, a statement_timeout are the caller's business); a failed
    connection as :class:`QueryFailed`, or :class:`OutcomeUnknown` if it broke (``broken``:
    the connection is closed now) after ``job`` sent something that commits. The driver's
    exception is ``__cause__``."""
    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return exc
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate and not sqlstate.startswith(_CONNECTION_FAILURE_CLASSES):
        return exc
    wrapped: QueryFailed
    if (refusal := pooler_refusal(exc)) is not None:  # PgBouncer never passed it on
        wrapped = QueryFailed(refusal)
    elif broken and job.commit_sent:
        wrapped = OutcomeUnknown(
            f"the connection was lost after the statement (or COMMIT) was sent and before its "
            f"result arrived: it may have been applied; check before retrying a write, or make "
            f"the write idempotent: {describe(exc)}")
    elif broken:  # PostgreSQL rolls back the open transaction of a session that ends
        wrapped = QueryFailed(f"the connection was lost before the job's statement or COMMIT "
                              f"was sent, so nothing of it was applied; safe to retry: "
                              f"{describe(exc)}")
    else:  # the server answered with the error: the statement failed, nothing committed
        wrapped = QueryFailed(f"the connection failed during the job: {describe(exc)}")
    wrapped.__cause__ = exc
    return wrapped


def will_commit(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether ending ``conn``'s transaction block now sends a COMMIT that can commit: not if
    the connection is gone (nothing is sent) or the transaction failed (it only rolls back)."""
    return conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS


def check_committed(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """After a transaction block: psycopg leaves it without a word when the connection is
    already lost (``fn`` caught the error and returned), so nothing committed; say so."""
    if conn.closed:
        raise psycopg.OperationalError("COMMIT was not sent: the connection is lost")


def no_connection_error(exc: BaseException, waited: float) -> BaseException:
    wrapped = CannotConnect(f"no connection to the database after {waited:.1f} s: "
                            f"{describe(exc) if str(exc) else ''}")
    wrapped.__cause__ = exc
    return wrapped


def deadline_of(value: Duration) -> float | None:
    """A caller's deadline in seconds, checked before anything is queued: ``None`` or
    infinity is no deadline; 0 fails at once (nothing is sent); past ``MAX_DEADLINE`` (which
    no wait can express) is a UsageError rather than an error after the job was queued."""
    seconds = to_seconds(value, "deadline")
    if seconds is not None and seconds > MAX_DEADLINE:
        raise UsageError(f"deadline must be at most {MAX_DEADLINE:.0f} s; use None for no "
                         f"deadline, got {value!r}")
    return seconds


def breaker_verdict(exc: BaseException | None) -> Verdict:
    """How a Database call counts for its circuit breaker (see ``guards.breaker``).

    Failures: no connection, a broken connection, and every deadline that passed while the
    job waited for a connection or ran on one (a black-holed network looks exactly like that:
    nothing errors, nothing answers, workers stay stuck and later jobs time out queued behind
    them — slow calls, as resilience4j counts them). Neutral: ``Overloaded`` (refused before
    it was tried), a closed Database, a caller's bad argument, a cancelled caller. Success:
    everything the server answered, including the statement's own errors (a unique
    violation, its statement_timeout). A caller who left by an exception raised into its
    wait is neutral too (:func:`caller_left`).
    """
    if exc is None:
        return "success"
    if isinstance(exc, DeadlineExceeded | CannotConnect | QueryFailed):
        return "failure"
    if isinstance(exc, Overloaded | DatabaseClosed | UsageError) \
            or not isinstance(exc, Exception):
        return "neutral"
    return "success"
