"""One exception hierarchy for everything pgsteady raises.

Errors raised on a database path also subclass ``psycopg.OperationalError`` (as psycopg_pool's
do), so an ``except psycopg.OperationalError`` a service already has keeps working::

    PgsteadyError
    ├── UsageError             bad arguments or input; the CLI exits 2
    ├── CannotConnect          no server answered; the CLI exits 3      (+ OperationalError)
    │   └── ServerWentAway     the server stopped or ended the session under a migration;
    │                          the message says whether that migration applied (or unknown)
    ├── LabError               the embedded cluster or a lab run could not do its job
    │   └── VersionNotInstalled  the PostgreSQL major asked for is not installed; exits 2
    ├── DeadlineExceeded       the caller's deadline passed             (+ OperationalError)
    │                          .phase says where the time went: "queued", "connecting"
    │                          (nothing was sent) or "running" (not cancelled: it may
    │                          still commit); .budget and .spent in seconds
    ├── Overloaded             the backlog is full; failed fast         (+ OperationalError)
    ├── DatabaseClosed         the Database was closed                  (+ OperationalError)
    ├── QueryFailed            the connection failed under the job      (+ OperationalError)
    │   │                      nothing of it was applied: safe to retry
    │   └── OutcomeUnknown     ...after its statement or COMMIT was sent: it may have been
    │                          applied (SQLSTATE 08007, + TransactionResolutionUnknown)
    ├── MigrationError         a migration was refused or failed; nothing half-applied
    │   ├── MigrationBlocked   preflight found sessions that would block it
    │   └── BadMigration       a migration file is malformed (file:line)
    ├── LintFailed             the linter found problems
    ├── CircuitOpen            a circuit breaker is open; nothing was tried (+ OperationalError)
    │                          .name, .retry_after in seconds
    ├── LimitExceeded          no slot for a key freed within the wait; .key, .limit, .retry_after
    └── CacheUnavailable       a shared cache (Redis) did not answer; StaleCache falls back to
                               its loader

Every error has ``exit_code``: what the CLI exits with when the error reaches it.
"""

from __future__ import annotations

import re
from typing import Literal

import psycopg

from pgsteady import _errors_root

# The root, UsageError and the exit codes live in a psycopg-free module (lint starts fast).
EXIT_OK = _errors_root.EXIT_OK
EXIT_FAILURE = _errors_root.EXIT_FAILURE
EXIT_USAGE = _errors_root.EXIT_USAGE
EXIT_CANNOT_CONNECT = _errors_root.EXIT_CANNOT_CONNECT
PgsteadyError = _errors_root.PgsteadyError
UsageError = _errors_root.UsageError


class LabError(PgsteadyError):
    """The embedded cluster, its proxy or a lab scenario could not run."""


class VersionNotInstalled(LabError):
    """The lab was asked for a PostgreSQL major that is not installed here; the message names
    the script that installs it (the user's to fix, hence exit 2)."""

    exit_code = EXIT_USAGE


class CannotConnect(PgsteadyError, psycopg.OperationalError):
    """No PostgreSQL or PgBouncer answered at the address given.

    A DSN setting libpq refuses before it tries the network (``sslmode=bogus``, a port that
    is not a number) is the user's typo, not an unreachable server: that exits 2."""

    exit_code = EXIT_CANNOT_CONNECT

    def __init__(self, message: str) -> None:
        super().__init__(message)
        if _REFUSED_SETTING.search(message):
            self.exit_code = EXIT_USAGE


class ServerWentAway(CannotConnect):
    """The server shut down, crashed or ended the session while a migration ran: not the
    migration's fault (exit 3, as for a server that does not answer). The message says
    whether that migration applied, read from the history on a new session, or that it is
    unknown until the server is back."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.exit_code = EXIT_CANNOT_CONNECT  # never read as a refused DSN setting


# libpq's own words for a connection setting it will not use ("invalid sslmode value",
# "invalid integer value ... for connection option", "invalid port number", ...).
_REFUSED_SETTING = re.compile(r"\binvalid (?:[\w ]+ )?(?:value|number|method)\b")


Phase = Literal["queued", "connecting", "running"]


class DeadlineExceeded(PgsteadyError, psycopg.OperationalError):
    """The caller's deadline passed. Phases "queued" and "connecting": nothing was sent, so a
    retry is safe. "running": the job is not cancelled and may still commit; its outcome
    (including a connection lost under it) goes to ``stats()`` and the ``pgsteady.runner``
    log, since the caller has left."""

    def __init__(self, phase: Phase, budget: float, spent: float) -> None:
        self.phase: Phase = phase
        self.budget = budget
        self.spent = spent
        where = {"queued": "queued in pgsteady", "connecting": "waiting for a connection",
                 "running": "running on the server; it is not cancelled and may still commit "
                            "(its outcome goes to stats() and the log)"}[phase]
        super().__init__(
            f"deadline of {budget * 1000:.0f} ms exceeded after {spent * 1000:.0f} ms; "
            f"the job was {where}"
        )


class Overloaded(PgsteadyError, psycopg.OperationalError):
    """More jobs are waiting than ``max_waiting`` allows; this one was refused at once."""

    def __init__(self, waiting: int, max_waiting: int) -> None:
        self.waiting = waiting
        self.max_waiting = max_waiting
        super().__init__(
            f"overloaded: {waiting} jobs already waiting (max_waiting={max_waiting}); failed fast"
        )


class DatabaseClosed(PgsteadyError, psycopg.OperationalError):
    """The Database was closed; no new jobs are accepted."""


class QueryFailed(PgsteadyError, psycopg.OperationalError):
    """The connection failed under the job before anything of it could commit (a statement
    not sent, or a transaction whose COMMIT was not): it was not applied and a retry is safe.
    The driver's error is ``__cause__``. See :class:`OutcomeUnknown` for the other case."""


class OutcomeUnknown(QueryFailed, psycopg.errors.TransactionResolutionUnknown):
    """The connection broke after a statement that commits on its own (autocommit) or a
    COMMIT was sent, and before its result arrived: it may have been applied.

    PostgreSQL commits such a statement even if the client is gone, so a caller retrying
    every :class:`QueryFailed` would write twice. ``sqlstate`` is ``"08007"``
    (transaction_resolution_unknown), and ``except QueryFailed`` still catches it."""


class MigrationError(PgsteadyError):
    """A migration was refused or failed, and nothing of it was applied."""


class MigrationBlocked(MigrationError):
    """Sessions hold or wait for locks a pending migration needs."""


class BadMigration(MigrationError):
    """A migration file is malformed; the message names the file and line."""

    exit_code = EXIT_USAGE


class LintFailed(PgsteadyError):
    """The linter reported findings."""


class CircuitOpen(PgsteadyError, psycopg.OperationalError):
    """A circuit breaker is open: the call failed at once, without touching anything."""

    def __init__(self, name: str, retry_after: float) -> None:
        self.name = name
        self.retry_after = retry_after
        super().__init__(f"circuit {name!r} is open after repeated failures; failed fast "
                         f"(next try allowed in {retry_after * 1000:.0f} ms)")


class LimitExceeded(PgsteadyError):
    """Every slot for a key stayed taken for the whole wait."""

    def __init__(self, key: str, limit: int, retry_after: float) -> None:
        self.key = key
        self.limit = limit
        self.retry_after = retry_after
        super().__init__(f"limit exceeded: {limit} of {limit} slots for {key!r} are taken; "
                         f"retry in about {retry_after * 1000:.0f} ms")


class CacheUnavailable(PgsteadyError):
    """A shared cache backend (Redis) failed or did not answer in time."""
