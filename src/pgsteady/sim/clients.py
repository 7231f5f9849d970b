"""Clients: closed-loop workers with a deadline, one class per way of giving up, as in the lab
(:mod:`pgsteady.lab.load`).

``naive``    at the deadline: a cancel request, then close the connection; reconnect.
``cancel``   a cancel request, wait ``cancel_delay`` more for the result, then close.
``psycopg``  a cancel request, then wait for the result however long it takes.
``steady``   :class:`pgsteady.Database`: ``pool_size + overcommit`` connections per pooler,
             held by its workers (the extra one only ever waits inside PgBouncer, and keeps
             every server busy while a worker turns a result into its next job); callers
             wait in a backlog of at most ``max_waiting`` jobs (refused at
             once above it, and a refused caller waits out its deadline before trying again,
             as the lab's does). The deadline ends the caller's wait: a queued job is
             dropped, a started one runs to completion. Its connections are never closed.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from pgsteady.sim.engine import Engine
from pgsteady.sim.pooler import CLOSED, Conn, Pooler
from pgsteady.sim.tally import Tally

_QUERY, _CANCELLING, _GRACE, _DONE = 0, 1, 2, 3


class WireWorker:
    """A worker speaking to PgBouncer directly (naive, cancel or psycopg)."""

    __slots__ = ("_deadlines", "_graces", "_late", "_pauses", "_phase", "_query",
                 "_reconnects", "conn", "engine", "mode", "pooler", "stop", "tally")

    def __init__(self, engine: Engine, pooler: Pooler, tally: Tally, *, mode: str,
                 stop: float, deadline: float, cancel_delay: float, turnaround: float,
                 think_time: float, connect_time: float) -> None:
        self.engine, self.pooler, self.tally = engine, pooler, tally
        self.mode, self.stop = mode, stop
        self._deadlines = engine.lane(deadline)
        # How long it waits after its cancel request before closing; psycopg: until the run's
        # end and a second (the lab's bound), which is longer than anything here.
        self._graces = engine.lane(cancel_delay if mode == "cancel" else stop + 1.0)
        self._pauses = engine.lane(turnaround + think_time)
        self._reconnects = engine.lane(connect_time + think_time)
        self.conn = Conn(self)
        self._query = 0
        self._phase = _DONE
        self._late = False

    def begin(self, _: Any) -> None:
        self._send(None)

    def _send(self, _: Any) -> None:
        engine = self.engine
        if engine.now >= self.stop:
            self.pooler.close(self.conn)
            self._phase = _DONE
            return
        self._query += 1
        self._phase = _QUERY
        self._late = False
        self.pooler.submit(self.conn)
        self._deadlines.after(self._on_deadline, self._query)

    def on_result(self, conn: Conn, ok: bool) -> None:
        if conn is not self.conn:
            return  # a connection it already left
        if conn.state == CLOSED:  # PgBouncer disconnected it (query_wait_timeout)
            self._query += 1
            self._reconnect()
            return
        phase = self._phase
        if phase == _QUERY:
            self._query += 1
            tally = self.tally
            counter = tally.answered if ok else tally.errors
            counter[int(self.engine.now)] += 1
            self._next()
        elif phase == _CANCELLING:
            self._late = True  # it still waits for its cancel request to be done
        elif phase == _GRACE:
            self._query += 1
            self._next()

    def _on_deadline(self, query: int) -> None:
        if query != self._query or self._phase != _QUERY:
            return
        tally = self.tally
        tally.timeouts[int(self.engine.now)] += 1
        self._phase = _CANCELLING
        self.pooler.cancel(self.conn, self._cancel_done, query)

    def _cancel_done(self, query: int) -> None:
        if query != self._query or self._phase != _CANCELLING:
            return
        if self.mode == "naive":
            self._reconnect()
        elif self._late:  # the result came while it cancelled: the connection is fine
            self._query += 1
            self._next()
        else:
            self._phase = _GRACE
            self._graces.after(self._grace_over, query)

    def _grace_over(self, query: int) -> None:
        if query == self._query and self._phase == _GRACE:
            self._reconnect()

    def _next(self) -> None:
        self._phase = _DONE
        self._pauses.after(self._send)

    def _reconnect(self) -> None:
        self.pooler.close(self.conn)
        self.conn = Conn(self)
        self._phase = _DONE
        self._reconnects.after(self._send)


_QUEUED, _RUNNING, _FINISHED, _DROPPED = 0, 1, 2, 3


class Job:
    __slots__ = ("abandoned", "caller", "state")

    def __init__(self, caller: SteadyCaller) -> None:
        self.caller = caller
        self.state = _QUEUED
        self.abandoned = False


class _SteadyConn(Conn):
    __slots__ = ("job",)

    def __init__(self, owner: SteadyDatabase) -> None:
        super().__init__(owner)
        self.job: Job | None = None


class SteadyDatabase:
    """One :class:`pgsteady.Database` in front of one pooler."""

    def __init__(self, engine: Engine, pooler: Pooler, *, pool_size: int, max_waiting: int,
                 turnaround: float, connect_time: float) -> None:
        self.engine, self.pooler = engine, pooler
        self.max_waiting = max_waiting
        self.turnaround, self.connect_time = turnaround, connect_time
        self._turnarounds = engine.lane(turnaround)
        self.backlog: deque[Job] = deque()
        self.queued = 0  # jobs in the backlog whose caller still waits
        self.free: list[_SteadyConn] = [_SteadyConn(self) for _ in range(pool_size)]
        self.abandoned_completions = 0

    def submit(self, job: Job) -> bool:
        """Queue ``job``, or refuse it (False) when the backlog is full."""
        if self.queued >= self.max_waiting:
            return False
        self.backlog.append(job)
        self.queued += 1
        if self.free:
            self._take(self.free.pop())
        return True

    def drop(self, job: Job) -> None:
        """The caller of a queued job left: it will never start."""
        job.state = _DROPPED
        self.queued -= 1

    def _take(self, conn: _SteadyConn) -> None:
        backlog = self.backlog
        while backlog:
            job = backlog.popleft()
            if job.state == _QUEUED:
                self.queued -= 1
                job.state = _RUNNING
                conn.job = job
                self.pooler.submit(conn)
                return
        self.free.append(conn)

    def on_result(self, conn: Conn, ok: bool) -> None:
        assert isinstance(conn, _SteadyConn)
        job, conn.job = conn.job, None
        if job is not None:
            job.state = _FINISHED
            if job.abandoned:
                self.abandoned_completions += ok
            else:
                job.caller.on_answer(ok)
        if conn.state == CLOSED:  # PgBouncer disconnected it: the pool opens a new one
            self.engine.at(self.engine.now + self.connect_time, self._next, _SteadyConn(self))
        else:
            self._turnarounds.after(self._next, conn)

    def _next(self, conn: _SteadyConn) -> None:
        self._take(conn)


class SteadyCaller:
    """A caller thread of a threaded service, calling ``db.fetchone(..., deadline=...)``."""

    __slots__ = ("_deadlines", "_pauses", "_refusals", "_thinks", "db", "engine", "job",
                 "stop", "tally")

    def __init__(self, engine: Engine, db: SteadyDatabase, tally: Tally, *, stop: float,
                 deadline: float, turnaround: float, think_time: float) -> None:
        self.engine, self.db, self.tally = engine, db, tally
        self.stop = stop
        self._deadlines = engine.lane(deadline)
        self._pauses = engine.lane(turnaround + think_time)
        self._thinks = engine.lane(think_time)
        # A refused request's slot stays busy for its deadline, as in the lab (retrying at
        # once would only spin), then the usual pause.
        self._refusals = engine.lane(deadline + think_time)
        self.job: Job | None = None

    def begin(self, _: Any) -> None:
        self._send(None)

    def _send(self, _: Any) -> None:
        engine = self.engine
        if engine.now >= self.stop:
            return
        job = Job(self)
        if not self.db.submit(job):
            tally = self.tally
            tally.rejected[int(engine.now)] += 1
            self._refusals.after(self._send)
            return
        self.job = job
        self._deadlines.after(self._on_deadline, job)

    def on_answer(self, ok: bool) -> None:
        tally = self.tally
        counter = tally.answered if ok else tally.errors
        counter[int(self.engine.now)] += 1
        self.job = None
        self._pauses.after(self._send)

    def _on_deadline(self, job: Job) -> None:
        if job is not self.job or job.state == _FINISHED:
            return
        tally = self.tally
        tally.timeouts[int(self.engine.now)] += 1
        if job.state == _QUEUED:
            self.db.drop(job)
        else:
            job.abandoned = True
        self.job = None
        self._thinks.after(self._send)
