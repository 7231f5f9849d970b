"""What the lock-queue lab reads from the database, four times a second.

One superuser session, opened before the clock starts (it never needs a free slot, and
superusers keep reserved ones anyway). Sessions "left behind" are those whose client is gone:
the kernel shows the server's end of their socket in CLOSE_WAIT (the client closed it, or died)
while the backend is still there — the seed's leak, measured without the apps' help.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from pgsteady.lab.scenarios import _lock_queue_sql as q

log = logging.getLogger("pgsteady.lab")

EVERY = 0.25
_CLOSE_WAIT = "08"


def closed_by_client(server_port: int, table: Path = Path("/proc/net/tcp")) -> set[int]:
    """Client ports of connections to ``server_port`` whose client end has closed."""
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return set()
    ports = set()
    for line in lines:
        fields = line.split()
        if len(fields) < 4 or fields[3] != _CLOSE_WAIT:
            continue
        local, remote = fields[1], fields[2]
        if int(local.rsplit(":", 1)[1], 16) == server_port:
            ports.add(int(remote.rsplit(":", 1)[1], 16))
    return ports


class Sampler(threading.Thread):
    """Samples on the run's clock until ``duration`` has passed or ``stop()``."""

    def __init__(self, dsn: str, server_port: int, t0: float, duration: float,
                 ready_ports: Callable[[], list[int]]) -> None:
        super().__init__(name="pgsteady-lab-lock-sampler", daemon=True)
        self.server_port = server_port
        self.t0, self.duration = t0, duration
        self.ready_ports = ready_ports
        self.samples: list[tuple[float, dict[str, Any]]] = []
        self.alter_pids: set[int] = set()
        self.long_query_pids: set[int] = set()
        self._long_seen: dict[int, list[float]] = {}
        self.applied_at: float | None = None
        self._halt = threading.Event()
        # Connect now, in the caller's thread, before the run starts.
        self._conn = psycopg.connect(dsn, autocommit=True, application_name="pgsteady-lab")
        row = self._conn.execute(q.ORGS_OID).fetchone()
        if row is None:
            raise psycopg.ProgrammingError("the lab database has no orgs table")
        self._oid = int(row[0])

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(5)
        self._conn.close()

    def run(self) -> None:
        tick = 0
        try:
            while not self._halt.is_set():
                at = self.t0 + tick * EVERY
                if at > self.t0 + self.duration:
                    return
                if self._halt.wait(max(0.0, at - time.monotonic())):
                    return
                self._sample(time.monotonic() - self.t0)
                tick += 1
        except psycopg.Error as exc:
            log.warning("sampling stopped: %s", str(exc).strip().splitlines()[0])

    def _sample(self, t: float) -> None:
        c = self._conn
        total, on_lock = c.execute(q.SESSIONS).fetchone() or (0, 0)
        queue = c.execute(q.LOCK_QUEUE, {"oid": self._oid}).fetchone()
        alters = c.execute(q.MIGRATION_SESSIONS).fetchall()
        self.alter_pids.update(int(pid) for pid, _ in alters)
        added = c.execute(q.COLUMN_ADDED, {"oid": self._oid}).fetchone()
        if added and added[0] and self.applied_at is None:
            self.applied_at = t
        longs = c.execute(q.LONG_QUERIES, {"oid": self._oid}).fetchall()
        for pid, age in longs:
            self.long_query_pids.add(int(pid))
            seen = self._long_seen.setdefault(int(pid), [t - float(age), t, 0])
            seen[1], seen[2] = t, seen[2] + 1
        gone = closed_by_client(self.server_port)
        ports = {int(p) for (p,) in c.execute(q.CLIENT_PORTS).fetchall()} if gone else set()
        self.samples.append((t, {
            "sessions": int(total), "queued_on_lock": int(on_lock),
            "lock_queue_orgs": int(queue[0]) if queue else 0,
            "alter_waiting": any(waiting for _, waiting in alters),
            "long_query": bool(longs), "left_behind": len(gone & ports),
            "replicas_ready": len(self.ready_ports()),
        }))

    def per_second(self, seconds: int) -> list[dict[str, Any]]:
        """Per second: peaks of the counts, the floor of left-behind sessions (those there for
        the whole second) and of ready replicas, and whether anything was waiting."""
        out = []
        last: dict[str, Any] = {"sessions": 0, "queued_on_lock": 0, "lock_queue_orgs": 0,
                                "alter_waiting": False, "long_query": False,
                                "left_behind": 0, "replicas_ready": 0}
        for t in range(seconds):
            inside = [s for at, s in self.samples if t <= at < t + 1] or [last]
            last = inside[-1]
            out.append({
                "sessions": max(s["sessions"] for s in inside),
                "queued_on_lock": max(s["queued_on_lock"] for s in inside),
                "lock_queue_orgs": max(s["lock_queue_orgs"] for s in inside),
                "alter_waiting": any(s["alter_waiting"] for s in inside),
                "long_query": any(s["long_query"] for s in inside),
                "left_behind": min(s["left_behind"] for s in inside),
                "replicas_ready": min(s["replicas_ready"] for s in inside),
            })
        return out

    def long_query_spans(self) -> list[tuple[float, float]]:
        """When long queries held orgs: one span per query (a parallel query's workers share
        their leader's), none for sessions seen once as they left a lock queue."""
        spans: list[tuple[float, float]] = []
        for a, b, sightings in sorted(self._long_seen.values()):
            if sightings >= 3 and not any(abs(a - x) < 0.3 for x, _ in spans):
                spans.append((round(max(0.0, a), 2), round(b, 2)))
        return spans
