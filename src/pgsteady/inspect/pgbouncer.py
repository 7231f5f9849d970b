"""PgBouncer's admin console and its log: the two places the pool-drain mechanism shows.

The log reader counts, per second, what the seeds tell an operator to look for: new server
connections, ``client disconnect while server was not ready`` closures (a connection destroyed
because its client left while queued) and ``cancel request for idle client`` (a cancel dropped
because the client was still queued). A server connection PgBouncer opens only to forward a
cancel is logged as a new connection too; it is told apart by its close reason.

:func:`sample` reads SHOW POOLS / STATS / SERVERS / CLIENTS a few times over a short window
(and CONFIG / DATABASES once) into plain data doctor's checks and an exporter can share;
:func:`scan_log` counts the same events per minute by the log's own timestamps.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pgsteady.errors import CannotConnect, UsageError
from pgsteady.settings import bounded_connect_timeout, redact, scrub

NOT_READY = "client disconnect while server was not ready"
CANCEL_IDLE = "cancel request for idle client"

# 2026-11-30 20:30:00.123 UTC [1234] LOG S-0x55d1c8: app/postgres@127.0.0.1:5432 <message>
_LINE = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) (?P<tz>\S+) \[\d+\] \w+ "
    r"(?:(?P<sock>[CS])-(?P<ptr>0x[0-9a-f]+): )?(?P<msg>.*)$"
)


def admin(dsn: str, command: str) -> list[dict[str, Any]]:
    """Run one admin-console command (``SHOW POOLS``, ``RELOAD``...) and return dict rows."""
    with psycopg.connect(dsn, autocommit=True,
                         connect_timeout=bounded_connect_timeout(dsn, 5)) as conn:
        cur = psycopg.ClientCursor(conn, row_factory=dict_row)  # the console speaks simple query
        cur.execute(command)
        return cur.fetchall() if cur.description else []


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


# -- sampling the admin console --------------------------------------------------------------

MAX_SAMPLES = 60
_SHOW_EVERY_SAMPLE = ("POOLS", "STATS", "SERVERS", "CLIENTS")


@dataclass(frozen=True)
class Pool:
    """One SHOW POOLS row: clients and server connections of one database/user pair."""

    database: str
    user: str
    cl_active: int
    cl_waiting: int
    sv_active: int
    sv_idle: int
    sv_used: int
    sv_tested: int
    sv_login: int
    maxwait: float  # seconds the oldest waiting client has waited
    pool_mode: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.database, self.user)

    @property
    def servers_ready(self) -> int:
        """Server connections logged in (idle, active, used or being tested)."""
        return self.sv_active + self.sv_idle + self.sv_used + self.sv_tested


@dataclass(frozen=True)
class Sample:
    """One reading of the console: pools, per-database stats, and connection counts."""

    elapsed: float  # seconds since the first sample
    pools: tuple[Pool, ...]
    stats: Mapping[str, Mapping[str, float]]  # database -> SHOW STATS columns
    servers_by_state: Mapping[str, int]
    clients_by_state: Mapping[str, int]


@dataclass(frozen=True)
class Database:
    """One SHOW DATABASES row (pool_size and min_pool_size as effective for it)."""

    name: str
    pool_size: int
    min_pool_size: int
    reserve_pool: int
    pool_mode: str | None
    max_connections: int
    current_connections: int
    paused: bool
    disabled: bool


@dataclass(frozen=True)
class BouncerSnapshot:
    """What doctor and an exporter read from a PgBouncer: its settings once, then samples."""

    dsn: str  # redacted
    version: str
    config: Mapping[str, str]
    databases: tuple[Database, ...]
    samples: tuple[Sample, ...]
    interval: float
    taken_at: float  # time.time() of the first sample

    def pool_series(self) -> dict[tuple[str, str], list[Pool]]:
        """Each pool's rows across the samples, oldest first (admin pseudo-db left out)."""
        series: dict[tuple[str, str], list[Pool]] = {}
        for sample in self.samples:
            for pool in sample.pools:
                if pool.database != "pgbouncer":
                    series.setdefault(pool.key, []).append(pool)
        return series

    def database(self, name: str) -> Database | None:
        return next((d for d in self.databases if d.name == name), None)

    def setting(self, key: str, default: str = "") -> str:
        return self.config.get(key, default)


def connect_admin(dsn: str, *, timeout: float = 5.0) -> psycopg.Connection[Any]:
    """A connection to PgBouncer's admin console; CannotConnect, or UsageError naming the
    mistake when ``dsn`` leads to PostgreSQL (or a pooled database) instead."""
    try:
        conn = psycopg.connect(dsn, autocommit=True,
                               connect_timeout=bounded_connect_timeout(dsn, timeout))
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CannotConnect(f"cannot connect to PgBouncer's admin console at "
                            f"{redact(dsn) or 'the default'}: {scrub(first)}") from exc
    server = conn.info.parameter_status("server_version") or ""
    if not server.endswith("/bouncer"):
        conn.close()
        raise UsageError(f"--pgbouncer answered as PostgreSQL {server.split()[0] or '?'}, not as "
                         f"PgBouncer's admin console; point it at PgBouncer's port with "
                         f"dbname=pgbouncer (and give PostgreSQL's DSN to --dsn)")
    return conn


def _show(conn: psycopg.Connection[Any], what: str) -> list[dict[str, Any]]:
    cur = psycopg.ClientCursor(conn, row_factory=dict_row)  # the console speaks simple query
    cur.execute(f"SHOW {what}")
    return cur.fetchall() if cur.description else []


def _pool(row: Mapping[str, Any]) -> Pool:
    return Pool(
        str(row["database"]), str(row["user"]), int(row["cl_active"]), int(row["cl_waiting"]),
        int(row["sv_active"]), int(row["sv_idle"]), int(row["sv_used"]),
        int(row["sv_tested"]), int(row["sv_login"]),
        int(row["maxwait"]) + int(row.get("maxwait_us") or 0) / 1e6,
        str(row.get("pool_mode") or ""))


def _database(row: Mapping[str, Any]) -> Database:
    return Database(
        str(row["name"]), int(row["pool_size"]), int(row.get("min_pool_size") or 0),
        int(row.get("reserve_pool") or 0), row.get("pool_mode") or None,
        int(row.get("max_connections") or 0), int(row.get("current_connections") or 0),
        bool(row.get("paused")), bool(row.get("disabled")))


def _numbers(row: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in row.items()
            if k != "database" and isinstance(v, int | float | Decimal)}


def sample(dsn: str, *, samples: int = 3, interval: float = 1.0,
           deadline: float | None = None) -> BouncerSnapshot:
    """SHOW POOLS / STATS / SERVERS / CLIENTS ``samples`` times, ``interval`` seconds apart
    (fewer if ``deadline``, absolute ``time.monotonic()``, would pass), on one connection."""
    samples = max(1, min(samples, MAX_SAMPLES))
    start = time.monotonic()
    deadline = deadline if deadline is not None else start + samples * (interval + 5.0)
    taken_at = time.time()
    conn = connect_admin(dsn, timeout=min(10.0, deadline - start))
    try:
        version = str(_show(conn, "VERSION")[0].get("version", ""))
        config = {str(r["key"]): str(r["value"]) for r in _show(conn, "CONFIG")}
        databases = tuple(_database(r) for r in _show(conn, "DATABASES"))
        taken: list[Sample] = []
        for i in range(samples):
            if i:
                pause = start + i * interval - time.monotonic()
                if time.monotonic() + max(pause, 0) >= deadline:
                    break
                time.sleep(max(pause, 0))
            rows = {what: _show(conn, what) for what in _SHOW_EVERY_SAMPLE}
            taken.append(Sample(
                elapsed=time.monotonic() - start,
                pools=tuple(_pool(r) for r in rows["POOLS"]),
                stats={str(r["database"]): _numbers(r) for r in rows["STATS"]},
                servers_by_state=Counter(str(r["state"]) for r in rows["SERVERS"]),
                clients_by_state=Counter(str(r["state"]) for r in rows["CLIENTS"])))
    finally:
        conn.close()
    return BouncerSnapshot(redact(dsn), version, config, databases, tuple(taken), interval,
                           taken_at)


# -- the log, per minute ---------------------------------------------------------------------

LOG_TAIL_BYTES = 32 * 1024 * 1024  # a big log is read from its last 32 MiB only


@dataclass(frozen=True)
class LogScan:
    """Events per minute of a PgBouncer log, placed by the log's own timestamps."""

    path: str
    first_epoch: float | None
    last_epoch: float | None  # the log's newest line, whatever it says
    per_minute: Mapping[int, Mapping[str, int]]  # minute start (epoch) -> kind -> count
    last_minute: Mapping[str, int]  # the 60 s up to last_epoch
    truncated: bool  # only the tail was read

    def peak(self, kind: str) -> tuple[int | None, int]:
        """The minute (epoch of its start) with the most ``kind`` events, and how many."""
        best = max(self.per_minute.items(), key=lambda kv: kv[1].get(kind, 0), default=None)
        if best is None or not best[1].get(kind):
            return None, 0
        return best[0], best[1][kind]


def scan_log(path: str | Path, *, window: float = 60.0,
             tail_bytes: int = LOG_TAIL_BYTES) -> LogScan:
    """Count not-ready closures, dropped cancels and new server connections per minute; the
    last ``window`` seconds end at the log's last timestamp (not the wall clock)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            f.seek(max(0, size - tail_bytes))
            chunk = f.read(tail_bytes)
    except OSError as exc:
        raise UsageError(f"cannot read the PgBouncer log {path}: {exc.strerror}; pass the file "
                         f"PgBouncer's logfile setting names") from None
    truncated = size > tail_bytes
    lines = chunk.decode("utf-8", errors="replace").splitlines()
    if truncated and lines:
        lines = lines[1:]  # the first one is probably cut
    stamps = [_parse_ts(m["ts"], m["tz"]) for m in map(_LINE.match, lines) if m]
    if lines and not stamps:
        raise UsageError(f"{path} has no PgBouncer log lines (expected lines like "
                         f"'2026-10-10 14:00:00.123 UTC [123] LOG ...'); check --pgbouncer-log")
    events = parse_lines(lines)
    last = max(stamps) if stamps else None
    per_minute: dict[int, Counter[str]] = defaultdict(Counter)
    last_minute: Counter[str] = Counter()
    for event in events:
        per_minute[int(event.epoch // 60 * 60)][event.kind] += 1
        if last is not None and event.epoch > last - window:
            last_minute[event.kind] += 1
    return LogScan(os.fspath(path), min(stamps) if stamps else None, last,
                   {k: dict(v) for k, v in sorted(per_minute.items())}, dict(last_minute),
                   truncated)
