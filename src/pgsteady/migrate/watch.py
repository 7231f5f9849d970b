"""Name the real blocker by watching: who is in the way of the migration's backend, now.

Prediction (preflight) can miss a session, or name one that ended; while a migration's
statement waits for a lock, a side connection reads ``pg_blocking_pids()`` of the
migration's own backend, and of each blocker in turn (the chain behind it), every
``interval`` seconds. Each failed try then names the sessions that were actually seen in the
way, whatever the analysis knew.

The side connection is labelled (``pgsteady-migrate-watch@host:pid``), has its own short
``statement_timeout`` and ``lock_timeout``, and only reads ``pg_locks`` and
``pg_stat_activity``: it takes no lock that could queue behind the migration. It looks only
while a try has been running for ``interval`` (``with watch.watching(): ...``), and opens its
connection, in its own thread, the first time it needs to: a run of quick migrations costs
it nothing. Its thread stops, and closes the connection, on every exit path
(``with BlockerWatch(...)``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pgsteady.migrate import queries
from pgsteady.migrate.preflight import QUERY_CHARS, Blocker, _session

log = logging.getLogger("pgsteady.migrate")

INTERVAL = 0.05
CHAIN_DEPTH = 5  # how far behind the direct blocker the chain is followed
MAX_SEEN = 50  # sessions remembered per try (bounded, even on a busy server)
IDLE_WAIT = 0.5  # how often an idle watch checks whether it should stop
STOP_WAIT = 7.0  # > the connect timeout of the watch connection (5 s)


def server_pid(conn: psycopg.Connection[Any]) -> int:
    """The backend's pid as the server knows it (behind a pooler, ``conn.info.backend_pid``
    is the pooler's own key, not a server pid)."""
    row = conn.execute(queries.BACKEND_PID).fetchone()
    return int(row[0]) if row else conn.info.backend_pid


def sharper(known: Blocker | None, seen: Blocker) -> Blocker:
    """The latest sighting of a session in one try, keeping the lock it was seen holding (or
    queued for) earlier in that try when this look could not tell it: ``pg_locks`` and
    ``pg_blocking_pids()`` are not read at one instant, so a look can catch the blocker but
    miss its lock row. A session still in the way still holds what it held."""
    if known is None or known.lock_mode is None or seen.lock_mode is not None:
        return seen
    return Blocker(seen.session, known.reason, known.lock_mode, known.relation, known.need)


class BlockerWatch:
    """Watches one backend; :meth:`take` returns (and forgets) the blockers seen so far."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], backend_pid: int, *,
                 interval: float = INTERVAL) -> None:
        self._connect = connect
        self._pid = backend_pid
        self._interval = interval
        self._stop = threading.Event()
        self._active = threading.Event()
        self._lock = threading.Lock()
        self._seen: dict[int, Blocker] = {}
        self._tries = 0  # tries begun: a look waits for one try to last an interval
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[Any] | None = None

    def __enter__(self) -> BlockerWatch:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="pgsteady-blocker-watch",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._active.set()  # wake it
        if self._thread is not None:
            self._thread.join(STOP_WAIT)
        self._active.clear()

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Mark a try in progress: the watch looks while it lasts."""
        self._tries += 1
        self._active.set()
        try:
            yield
        finally:
            self._active.clear()

    def next_try(self) -> None:
        """Inside :meth:`watching`, a new try begins (the next Alembic step of a pass): the
        watch waits for this one to last its interval before it looks."""
        self._tries += 1

    def take(self) -> list[Blocker]:
        """The sessions seen blocking since the last call, direct blockers first."""
        with self._lock:
            seen, self._seen = self._seen, {}
        return sorted(seen.values(), key=lambda b: (b.reason != "holds", b.session.pid))

    def poll(self) -> None:
        """One look (the thread calls it every ``interval``; tests may call it directly)."""
        if self._conn is None:
            return
        with self._conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(queries.WATCH_BLOCKERS, {
                "pid": self._pid, "depth": CHAIN_DEPTH, "query_chars": QUERY_CHARS}).fetchall()
        with self._lock:
            for row in rows:
                if len(self._seen) >= MAX_SEEN and row["pid"] not in self._seen:
                    break
                if row["depth"] == 1 and (row["held_mode"] or row["waited_mode"]):
                    reason = "holds" if row["held_mode"] else "waits for"  # queued ahead
                    mode = row["held_mode"] or row["waited_mode"]
                    relation = row["relation"]
                elif row["depth"] == 1:  # e.g. a row lock, or a transaction it waits out
                    reason, mode, relation = "blocks it", None, None
                else:
                    reason, mode, relation = f"blocks pid {row['blocked_pid']}", None, None
                seen = Blocker(_session(row), reason, mode, relation, None)
                self._seen[row["pid"]] = sharper(self._seen.get(row["pid"]), seen)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if not self._active.wait(IDLE_WAIT):
                    continue
                # A try is running: look once it has lasted an interval (quick ones never,
                # even back to back: the same try must still be running).
                try_seen = self._tries
                if self._stop.wait(self._interval) or not self._active.is_set() \
                        or self._tries != try_seen:
                    continue
                if self._conn is None and not self._open():
                    return
                self.poll()
        except psycopg.Error:
            log.debug("blocker watch stopped", exc_info=True)
        finally:
            self._close()

    def _open(self) -> bool:
        try:
            self._conn = self._connect()
            self._conn.execute(queries.WATCH_SETUP)
        except psycopg.Error:
            # Watching is a courtesy: without it, blockers are named by prediction.
            log.debug("cannot open the blocker watch connection", exc_info=True)
            self._close()
            return False
        return True

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                log.debug("could not close the blocker watch connection", exc_info=True)
            self._conn = None
