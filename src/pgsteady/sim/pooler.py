"""PgBouncer's pool in transaction mode, as the pool-drain outage (docs/outages.md) and
PgBouncer's code describe it.

- At most ``pool_size`` server connections; ``min_pool_size`` kept open.
- One server connection attempt at a time per pool ("Allow only a single connection attempt
  at a time", ``launch_new_connection``), each taking the connect latency; a failed login
  (``max_connections`` reached) blocks new attempts for ``server_login_retry``.
- A query that finds no idle server is parked in a FIFO queue and its client's socket is not
  read again until a server is linked to it (``pause_client``). A client that closed while
  parked is found only then: the server is mid-request ("not ready") and is closed.
- A client that closes while linked is seen at once, and its server is closed too.
- A cancel request for a client with no linked server is dropped ("cancel request for idle
  client"); for a linked one it is forwarded on a new connection to the server (one connect
  latency; not a pool refill, and it does not take the refill slot: the slot is held only
  until the TCP connect, and the lab's proxy accepts at once). A server whose query ends
  while a cancel for it is still on its way is not given to anyone until the cancel has
  been sent ("being canceled", ``release_server`` since PgBouncer 1.18, which keeps a late
  cancel from hitting the next client's query): one connect latency out of the pool for
  every query whose caller gave up while it ran.
- ``query_wait_timeout``: the maintenance loop (three times a second) disconnects clients
  parked longer than that.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from pgsteady.sim.engine import Engine
from pgsteady.sim.server import Server
from pgsteady.sim.tally import Tally

IDLE, WAITING, ACTIVE, CLOSED = 0, 1, 2, 3
MAINTENANCE_EVERY = 1.0 / 3.0


class Client(Protocol):
    """Whoever owns a client connection: told when its query ends."""

    def on_result(self, conn: Conn, ok: bool) -> None: ...


class Conn:
    """One client connection to PgBouncer."""

    __slots__ = ("cancel_until", "cancelled", "done_at", "owner", "since", "state")

    def __init__(self, owner: Client) -> None:
        self.owner = owner
        self.state = IDLE
        self.since = 0.0        # when its query was parked
        self.done_at = -1.0     # when its linked query ends; an event at another time is stale
        self.cancelled = False
        self.cancel_until = 0.0  # when a cancel forwarded for its linked query is sent


class Pooler:
    """One PgBouncer process with one pool (one database/user pair)."""

    def __init__(self, engine: Engine, server: Server, tally: Tally, *, pool_size: int,
                 min_pool_size: int, connect_latency: float, cancel_latency: float,
                 query_wait_timeout: float,
                 server_login_retry: float) -> None:
        self.engine, self.server, self.tally = engine, server, tally
        self.pool_size, self.min_pool_size = pool_size, min_pool_size
        self.connect_latency = connect_latency  # a refill: the connect and the login
        self.cancel_latency = cancel_latency    # a forwarded cancel: the connect only
        self.query_wait_timeout = query_wait_timeout
        self.server_login_retry = server_login_retry
        self.idle = 0
        self.active = 0
        self.being_canceled = 0
        self.login = False
        self.retry_at = 0.0
        self.waiting: deque[Conn] = deque()
        self._cancel_replies = engine.lane(server.round_trip / 2)

    def prefill(self, horizon: float) -> None:
        """Open ``min_pool_size`` servers before the clock starts, as the lab does, and start
        the maintenance loop if query_wait_timeout can matter before ``horizon``."""
        for _ in range(self.min_pool_size):
            if self.server.connect():
                self.idle += 1
        if self.query_wait_timeout < horizon:
            self.engine.at(MAINTENANCE_EVERY, self._maintenance)

    # -- what clients do ---------------------------------------------------------------------

    def submit(self, conn: Conn) -> None:
        """``conn`` sends a query: link a server, or park it."""
        if self.idle:
            self.idle -= 1
            self._link(conn)
        else:
            conn.state = WAITING
            conn.since = self.engine.now
            self.waiting.append(conn)
            self._launch()

    def close(self, conn: Conn) -> None:
        """``conn`` sends Terminate and closes its socket."""
        state = conn.state
        conn.state = CLOSED
        if state == ACTIVE:
            tally = self.tally
            tally.not_ready_closures[int(self.engine.now)] += 1
            conn.done_at = -1.0
            self.active -= 1
            self._destroy()
        # WAITING: it stays parked, unread, until its turn. IDLE: PgBouncer sees it at once.

    def cancel(self, conn: Conn, done: Any, token: Any) -> None:
        """A CancelRequest for ``conn``'s query; ``done(token)`` when PgBouncer closes the
        cancel connection."""
        engine = self.engine
        now = engine.now
        if conn.state != ACTIVE:
            tally = self.tally
            tally.dropped_cancels[int(now)] += 1
            self._cancel_replies.after(done, token)
            return
        arrives = self.server.through(now, self.cancel_latency)
        conn.cancel_until = max(conn.cancel_until, arrives)
        if conn.done_at > arrives:  # still running when the cancel lands: it ends now
            conn.done_at = arrives
            conn.cancelled = True
            engine.at(arrives, self._query_done, conn)
        engine.at(arrives, done, token)

    # -- the pool ----------------------------------------------------------------------------

    def _link(self, conn: Conn) -> None:
        conn.state = ACTIVE
        conn.cancelled = False
        conn.cancel_until = 0.0
        self.active += 1
        server = self.server
        done = server.through(self.engine.now, server.query_hold())
        conn.done_at = done
        self.engine.at(done, self._query_done, conn)

    def _query_done(self, conn: Conn) -> None:
        if conn.state != ACTIVE or conn.done_at != self.engine.now:
            return  # stale: the client left, or a cancel ended the query earlier
        conn.state = IDLE
        conn.done_at = -1.0
        self.active -= 1
        if not conn.cancelled:
            tally = self.tally
            tally.db_completions[int(self.engine.now)] += 1
        if conn.cancel_until > self.engine.now:  # a cancel for it is still on its way
            self.being_canceled += 1
            self.engine.at(conn.cancel_until, self._canceled)
        else:
            self._server_free()
        conn.owner.on_result(conn, not conn.cancelled)

    def _canceled(self, _: Any) -> None:
        """The cancel was sent: the server it targeted goes back to work."""
        self.being_canceled -= 1
        self._server_free()

    def _server_free(self) -> None:
        """A server is ready for the next client: the head of the queue, or idle."""
        waiting = self.waiting
        while waiting:
            conn = waiting.popleft()
            if conn.state == CLOSED:  # left while parked: found only now
                tally = self.tally
                tally.not_ready_closures[int(self.engine.now)] += 1
                self._destroy()
                return
            if conn.state == WAITING:
                self._link(conn)
                return
        self.idle += 1

    def _destroy(self) -> None:
        self.server.disconnect()
        self._launch()

    def _launch(self, _: Any = None) -> None:
        """Open one more server connection if the pool needs one and none is being opened."""
        if self.login:
            return
        now = self.engine.now
        total = self.idle + self.active + self.being_canceled
        if total >= self.pool_size or (not self.waiting and total >= self.min_pool_size):
            return
        if now < self.retry_at:
            return
        self.login = True
        tally = self.tally
        tally.server_connections_opened[int(now)] += 1
        self.engine.at(self.server.through(now, self.connect_latency), self._login_done)

    def _login_done(self, _: Any) -> None:
        self.login = False
        if self.server.connect():
            self._server_free()
            self._launch()
        else:  # too many connections: PgBouncer waits server_login_retry before trying again
            self.retry_at = self.engine.now + self.server_login_retry
            self.engine.at(self.retry_at, self._launch)

    def _maintenance(self, _: Any) -> None:
        """Disconnect clients parked longer than query_wait_timeout (oldest first)."""
        engine = self.engine
        limit = engine.now - self.query_wait_timeout
        waiting = self.waiting
        while waiting and waiting[0].since <= limit:
            conn = waiting.popleft()
            if conn.state == WAITING:
                conn.state = CLOSED
                tally = self.tally
                tally.errors[int(engine.now)] += 1
                conn.owner.on_result(conn, False)
        engine.at(engine.now + MAINTENANCE_EVERY, self._maintenance)
