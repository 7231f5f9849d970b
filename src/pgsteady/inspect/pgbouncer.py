"""PgBouncer's admin console and its log: the two places the pool-drain mechanism shows.

The log reader counts, per second, what the seeds tell an operator to look for: new server
connections, ``client disconnect while server was not ready`` closures (a connection destroyed
because its client left while queued) and ``cancel request for idle client`` (a cancel dropped
because the client was still queued). A server connection PgBouncer opens only to forward a
cancel is logged as a new connection too; it is told apart by its close reason.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

NOT_READY = "client disconnect while server was not ready"
CANCEL_IDLE = "cancel request for idle client"

# 2026-11-30 20:30:00.123 UTC [1234] LOG S-0x55d1c8: app/postgres@127.0.0.1:5432 <message>
_LINE = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) (?P<tz>\S+) \[\d+\] \w+ "
    r"(?:(?P<sock>[CS])-(?P<ptr>0x[0-9a-f]+): )?(?P<msg>.*)$"
)


def admin(dsn: str, command: str) -> list[dict[str, Any]]:
    """Run one admin-console command (``SHOW POOLS``, ``RELOAD``...) and return dict rows."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        cur = psycopg.ClientCursor(conn, row_factory=dict_row)  # the console speaks simple query
        cur.execute(command)
        return cur.fetchall() if cur.description else []


def show_pools(dsn: str, database: str | None = None) -> list[dict[str, Any]]:
    """SHOW POOLS, optionally only the rows of one database."""
    rows = admin(dsn, "SHOW POOLS")
    return [r for r in rows if database is None or r["database"] == database]


@dataclass
class LogEvent:
    """One PgBouncer log line we care about."""

    epoch: float
    kind: str  # "server_opened", "not_ready", "cancel_idle", "cancel_forwarded"
    socket: str


@dataclass
class LogCounts:
    """Counts of :class:`LogEvent` kinds, per whole second since ``start`` and in total."""

    per_second: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    total: Counter[str] = field(default_factory=Counter)


def _parse_ts(ts: str, tz: str) -> float:
    naive = datetime.strptime(ts, "%Y-%m-%d %H:%M:%S.%f")
    if tz not in ("UTC", "GMT"):
        return naive.timestamp()  # local time: the lab starts PgBouncer with TZ=UTC anyway
    return naive.replace(tzinfo=UTC).timestamp()


def parse_lines(lines: Iterable[str]) -> list[LogEvent]:
    """Events from PgBouncer log lines; server connections that only forwarded a cancel are
    reported as ``cancel_forwarded`` rather than ``server_opened``."""
    events: list[LogEvent] = []
    opened: dict[str, LogEvent] = {}
    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        msg, sock = m["msg"], f"{m['sock']}-{m['ptr']}"
        epoch = _parse_ts(m["ts"], m["tz"])
        if m["sock"] == "S" and "new connection to server" in msg:
            event = LogEvent(epoch, "server_opened", sock)
            opened[sock] = event
            events.append(event)
        elif NOT_READY in msg:
            events.append(LogEvent(epoch, "not_ready", sock))
        elif CANCEL_IDLE in msg:
            events.append(LogEvent(epoch, "cancel_idle", sock))
        if m["sock"] == "S" and "closing because:" in msg and sock in opened:
            first = opened.pop(sock)
            if "cancel" in msg.split("closing because:", 1)[1]:
                first.kind = "cancel_forwarded"
    return events


class LogReader:
    """Reads a PgBouncer log incrementally from where the reader was created."""

    def __init__(self, path: Path, *, from_start: bool = False) -> None:
        self.path = path
        self._offset = 0 if from_start or not path.exists() else path.stat().st_size

    def read(self) -> list[LogEvent]:
        """Events logged since the last call (or since the reader was made)."""
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]  # leave a half-written line for next time
        self._offset += len(complete)
        return parse_lines(complete.decode("utf-8", errors="replace").splitlines())

    def counts(self, start_epoch: float | None = None) -> LogCounts:
        """Counts of the new events, bucketed per second since ``start_epoch``."""
        result = LogCounts()
        for event in self.read():
            result.total[event.kind] += 1
            if start_epoch is not None and event.epoch >= start_epoch:
                result.per_second[math.floor(event.epoch - start_epoch)][event.kind] += 1
        return result
