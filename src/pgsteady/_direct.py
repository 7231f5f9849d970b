"""A one-statement call runs on its caller's thread; if the caller leaves, a worker finishes it.

Handing each call to a worker thread costs two thread wake-ups, a fifth of a ``select 1``
through psycopg_pool on a 2-core host (``bench/runner_overhead.py``). So a one-statement call
(``Database.fetchone``/``fetchall``/``execute``) that finds a worker idle with a connection
borrows that connection and runs on its own thread, as a psycopg_pool caller does, waiting for
the answer only until its deadline. psycopg runs a statement as a generator that the
connection's ``wait`` drives over the socket; ``wait``'s timeout stops it with the generator
suspended between two socket events (psycopg itself resumes one that way after a Ctrl-C). At
the deadline the caller hands that generator to the connection's worker, which drives it to
its end: the query is neither cancelled nor cut off, the connection goes back to the pool only
after it, and the caller leaves with ``DeadlineExceeded`` at once.

``AsyncDatabase`` does the same on the caller's task (:class:`DrivenAsyncConnection`): a
hand-off there costs two task switches per call, more than psycopg_pool's whole checkout. A
caller cancelled in the wait (``asyncio.timeout``, a closed client) leaves the same way: the
statement is handed over, never cancelled (psycopg's own ``wait`` cancels it on the server).

No library offers this in public: it leans on ``Connection.wait``'s ``timeout`` and the
``_WaitTimeout`` it raises (recent psycopg 3.3 releases; not 3.2 or 3.3.0). :data:`ENABLED`
probes for them once; without them every call takes the hand-off path, which is slower and
exactly as safe.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import generators, waiting
from psycopg.abc import PQGen
from psycopg.rows import TupleRow

log = logging.getLogger("pgsteady.runner")

INTERVAL = 0.1
"""How often a wait wakes to let Python see a signal (psycopg's own interval)."""


def _probe() -> type[BaseException] | None:
    """psycopg's wait-timeout exception, if its ``Connection.wait`` takes a timeout."""
    timeout_error = getattr(psycopg.errors, "_WaitTimeout", None)
    try:
        params = inspect.signature(psycopg.Connection.wait).parameters
    except (TypeError, ValueError):
        return None
    try:
        aparams = inspect.signature(waiting.wait_async).parameters
    except (AttributeError, TypeError, ValueError):
        return None
    if not (isinstance(timeout_error, type) and issubclass(timeout_error, BaseException)
            and "timeout" in params and "timeout" in aparams
            and callable(getattr(waiting, "wait", None))):
        return None
    return timeout_error


_WAIT_TIMEOUT = _probe()
ENABLED = _WAIT_TIMEOUT is not None
"""Whether one-statement calls may run on their caller's thread (see the module docstring)."""


class Left(BaseException):
    """Raised through psycopg's frames when the caller leaves at its deadline: a
    BaseException, so that nothing between the wait and the runner mistakes it for the
    statement's own error."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class Drive:
    """One call's deadline, and what to do with the statement's generator if it passes."""

    __slots__ = ("deadline", "handed", "leave")

    def __init__(self, deadline: float | None,
                 leave: Callable[[PQGen[Any], bool], BaseException]) -> None:
        self.deadline = deadline
        self.leave = leave
        self.handed = False


class DrivenConnection(psycopg.Connection[TupleRow]):
    """A psycopg connection whose statements its caller can leave half-way (see the module
    docstring). Without a :class:`Drive` set it is a plain ``psycopg.Connection``."""

    pgsteady_drive: Drive | None = None

    def wait(self, gen: PQGen[Any], interval: float = INTERVAL,
             timeout: float | None = None) -> Any:
        drive = self.pgsteady_drive
        if drive is None or timeout is not None or _WAIT_TIMEOUT is None:
            return super().wait(gen, interval, timeout)
        left = None if drive.deadline is None else max(0.0, drive.deadline - time.monotonic())
        try:
            return waiting.wait(gen, self.pgconn.socket, interval=interval, timeout=left)
        except BaseException as exc:
            raised = _hand_over(self, drive, gen, exc)
            if raised is exc:
                raise
            raise raised from None


class DrivenAsyncConnection(psycopg.AsyncConnection[TupleRow]):
    """:class:`DrivenConnection` for asyncio: the caller's task drives the statement, and
    leaves it to the worker at its deadline or when it is cancelled in the wait."""

    pgsteady_drive: Drive | None = None

    async def wait(self, gen: PQGen[Any], interval: float = INTERVAL,
                   timeout: float | None = None) -> Any:
        drive = self.pgsteady_drive
        if drive is None or timeout is not None or _WAIT_TIMEOUT is None:
            return await super().wait(gen, interval, timeout)
        left = None if drive.deadline is None else max(0.0, drive.deadline - time.monotonic())
        try:
            # No interval timer: asyncio delivers a Ctrl-C or a cancel without one.
            return await waiting.wait_async(gen, self.pgconn.socket, interval=_NO_INTERVAL,
                                            timeout=left)
        except BaseException as exc:  # a cancel, too, is raised into the wait
            raised = _hand_over(self, drive, gen, exc)
            if raised is exc:
                raise
            raise raised from None


_NO_INTERVAL = 3600.0
"""psycopg's async wait arms a timer for its interval; an hour is one that never fires."""


def _hand_over(conn: DrivenConnection | DrivenAsyncConnection, drive: Drive, gen: PQGen[Any],
               exc: BaseException) -> BaseException:
    """What a driven wait ended by ``exc`` raises. The deadline, or an exception raised into
    the wait (a signal handler's, Ctrl-C, a cancel): the caller leaves, and the statement goes
    on without it on the worker (:class:`Left` for the deadline, else ``exc`` itself). An
    error of the statement itself (a failed connection, a parameter that cannot be encoded)
    is the call's own failure: ``exc``, nothing handed over."""
    deadline = isinstance(exc, _WAIT_TIMEOUT)  # type: ignore[arg-type]
    if not (deadline or _raised_into_wait(gen, exc)):
        return exc
    conn.pgsteady_drive = None
    drive.handed = True
    error = drive.leave(gen, not deadline)
    return Left(error) if deadline else exc


def _raised_into_wait(gen: PQGen[Any], exc: BaseException) -> bool:
    """Whether ``exc`` came into the wait from outside (a signal handler runs in the caller's
    thread while it sleeps on the socket) rather than from the statement: the statement's
    generator is then intact, suspended at a socket wait, and a worker can drive it on; a
    generator that raised its own error has ended. (A generator of unknown make: only Ctrl-C
    and SystemExit are taken as the caller leaving, as before.)"""
    if isinstance(exc, psycopg.Error):
        return False
    frame = getattr(gen, "gi_frame", gen)
    if frame is gen:
        return isinstance(exc, KeyboardInterrupt | SystemExit)
    return frame is not None and not getattr(gen, "gi_running", True)


@functools.cache
def driven(base: type[psycopg.Connection[Any]]) -> type[psycopg.Connection[Any]]:
    """``base`` (a pool's ``connection_class``) with :class:`DrivenConnection`'s wait; one
    class per base, however many Databases use it."""
    if issubclass(base, DrivenConnection):
        return base
    if base is psycopg.Connection:
        return DrivenConnection
    return type(f"Driven{base.__name__}", (DrivenConnection, base), {})


@functools.cache
def adriven(base: type[psycopg.AsyncConnection[Any]]) -> type[psycopg.AsyncConnection[Any]]:
    """:func:`driven` for an ``AsyncConnectionPool``'s ``connection_class``."""
    if issubclass(base, DrivenAsyncConnection):
        return base
    if base is psycopg.AsyncConnection:
        return DrivenAsyncConnection
    return type(f"Driven{base.__name__}", (DrivenAsyncConnection, base), {})


async def afinish(conn: psycopg.AsyncConnection[Any], gen: PQGen[Any]) -> None:
    """:func:`finish` on the worker's task."""
    await conn.wait(gen)
    if conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
        await conn.close()
        raise psycopg.OperationalError("the statement its caller left could not be finished")


def finish(conn: psycopg.Connection[Any], gen: PQGen[Any]) -> None:
    """Drive a statement its caller left to its end, on the worker's thread. A connection
    left mid-command (the generator ended by an exception inside it) is closed: nothing
    else can be sent on it."""
    conn.wait(gen)
    if conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
        conn.close()
        raise psycopg.OperationalError("the statement its caller left could not be finished")


_IDLE = psycopg.pq.TransactionStatus.IDLE


def ready(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether ``conn`` may be lent or used for the next job: open and idle — never with a
    statement running or a transaction open."""
    return not conn.closed and conn.pgconn.transaction_status == _IDLE


def settle(conn: psycopg.Connection[Any]) -> None:
    """Bring ``conn`` back to idle on its worker before the pool has it again: read the
    results of a statement its caller's thread stopped reading (an exception raised into the
    caller outside the wait), roll back an open transaction. Closed only if that fails: a
    close under a running statement is what makes PgBouncer destroy a server connection."""
    if ready(conn) or conn.closed:
        return
    try:
        if conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
            conn.wait(generators.execute(conn.pgconn))
        if not ready(conn):
            conn.rollback()
    except Exception as exc:  # closed below: the pool gets nothing half-done
        log.debug("could not bring a connection back to idle: %s", exc)
    if not ready(conn):
        conn.close()


async def asettle(conn: psycopg.AsyncConnection[Any]) -> None:
    """:func:`settle` on the worker's task."""
    if ready(conn) or conn.closed:
        return
    try:
        if conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
            await conn.wait(generators.execute(conn.pgconn))
        if not ready(conn):
            await conn.rollback()
    except Exception as exc:  # closed below: the pool gets nothing half-done
        log.debug("could not bring a connection back to idle: %s", exc)
    if not ready(conn):
        await conn.close()
