"""One read-only look at a PostgreSQL server: sessions, blocking chains, lock queues, the xmin
horizon, connection use, invalid indexes and the settings that matter, in a few catalog queries.

The snapshot is plain data (frozen dataclasses) so that doctor's checks, ``blockers`` and a
Prometheus collector can all read it without querying again. Taking it never makes things
worse: the session is labelled ``pgsteady-doctor@host:pid``, runs one ``READ ONLY``
transaction with a short ``lock_timeout`` and a ``statement_timeout`` from the caller's
deadline, and reads no size function that would lock a relation (see :mod:`.queries`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pgsteady.errors import CannotConnect, PgsteadyError, UsageError
from pgsteady.inspect import queries
from pgsteady.settings import bounded_connect_timeout, default_label, pg_interval, redact, scrub

log = logging.getLogger("pgsteady.inspect")

QUERY_CHARS = 200
DOCTOR_LOCK_TIMEOUT = 0.1  # doctor reads catalogs only; a wait this long means something odd
DEFAULT_TIMEOUT = 5.0


@dataclass(frozen=True)
class Session:
    """One backend as an operator needs to see it (ages in seconds, ``None`` when unknown)."""

    pid: int
    database: str
    user: str
    application_name: str
    client_addr: str | None
    client_port: int | None
    backend_type: str
    state: str
    backend_age: float | None
    xact_age: float | None
    query_age: float | None
    state_age: float | None
    wait_event_type: str | None
    wait_event: str | None
    xmin_age_xids: int | None
    superuser: bool
    query: str
    blocked_by: tuple[int, ...] = ()
    # Which session holds the pid (a later one may get it): both are compared before ending it.
    backend_start: datetime | None = None
    usename: str | None = None  # None for PostgreSQL's own processes, unlike ``user``
    # Another role's session this role may not look into (no pg_read_all_stats / pg_monitor):
    # state, waits, query and times are hidden; pid, user, database and application_name show.
    hidden: bool = False

    @property
    def is_client(self) -> bool:
        return self.backend_type == "client backend"

    @property
    def label(self) -> str:
        return self.application_name or "no application_name"

    @property
    def client(self) -> str:
        if self.client_addr is None:
            return "local socket" if self.is_client else ""
        return f"{self.client_addr}:{self.client_port}" if self.client_port else self.client_addr

    def as_dict(self) -> dict[str, Any]:
        """The fields an operator reads, ages rounded to milliseconds."""
        return {
            "pid": self.pid, "application_name": self.application_name, "user": self.user,
            "database": self.database, "client": self.client, "state": self.state,
            "xact_age_s": _round(self.xact_age), "query_age_s": _round(self.query_age),
            "state_age_s": _round(self.state_age),
            "wait": f"{self.wait_event_type}:{self.wait_event}" if self.wait_event_type else None,
            "query": self.query,
        }


@dataclass(frozen=True)
class Lock:
    """A row of ``pg_locks`` that matters: a wait, or a granted lock someone waits behind."""

    pid: int
    locktype: str
    mode: str
    granted: bool
    relation: str | None
    wait_age: float | None


@dataclass(frozen=True)
class Setting:
    """A server setting as a new session of doctor's role and database sees it."""

    name: str
    value: str       # what SHOW says (for keepalives: the socket's real value)
    configured: str  # pg_settings.reset_val ("0" keepalives = the OS default)
    unit: str
    source: str      # default, configuration file, database, user, database user, ...
    sourcefile: str | None
    sourceline: int | None

    def where(self) -> str:
        if self.sourcefile:
            return f"{self.source} ({self.sourcefile}:{self.sourceline})"
        return self.source


@dataclass(frozen=True)
class Override:
    """``ALTER DATABASE / ROLE ... SET``: a value for one database, one role, or both."""

    database: str
    role: str
    name: str
    value: str


@dataclass(frozen=True)
class SlotHold:
    """A replication slot holding back the xmin horizon."""

    slot_name: str
    slot_type: str
    active: bool
    active_pid: int | None
    database: str
    xmin_age_xids: int | None
    catalog_xmin_age_xids: int | None


@dataclass(frozen=True)
class PreparedXact:
    """A prepared (two-phase) transaction: holds locks and the xmin horizon until resolved."""

    gid: str
    owner: str
    database: str
    age: float
    xid_age: int


@dataclass(frozen=True)
class InvalidIndex:
    schema: str
    index: str
    table: str
    bytes: int
    building: bool  # a CREATE INDEX CONCURRENTLY is building it right now


@dataclass(frozen=True)
class Queued:
    """A session in a blocking chain, waiting, and the pids directly in its way."""

    session: Session
    blocked_by: tuple[int, ...]
    waiting_for: Lock | None
    depth: int  # 1: blocked by the root itself


@dataclass(frozen=True)
class Chain:
    """A root blocker (holds, waits for nothing) and every session queued behind it."""

    root: Session
    holds: tuple[Lock, ...]
    queued: tuple[Queued, ...]

    @property
    def longest_wait(self) -> float:
        ages = [_wait_age(q) for q in self.queued]
        return max((a for a in ages if a is not None), default=0.0)

    def queued_per_relation(self) -> dict[str, int]:
        counts = Counter(q.waiting_for.relation or q.waiting_for.locktype
                         for q in self.queued if q.waiting_for is not None)
        return dict(counts.most_common())


@dataclass(frozen=True)
class LockQueue:
    """The seed-002 pattern: an ACCESS EXCLUSIVE request waits, and sessions queue behind it."""

    relation: str
    waiter: Session            # the session asking for ACCESS EXCLUSIVE (an ALTER TABLE...)
    waiter_lock: Lock
    roots: tuple[Session, ...]  # what the waiter itself waits behind, at the top of the chain
    queued: tuple[Session, ...]  # sessions waiting behind the waiter

    @property
    def waiting(self) -> int:
        """Sessions waiting in this queue, the ACCESS EXCLUSIVE request included: the count
        ``blockers`` and ``watch`` show for its chain."""
        return waiting_sessions((self.waiter, *self.queued))


@dataclass(frozen=True)
class PostgresSnapshot:
    """Everything doctor, blockers and the exporter read about one server at one moment."""

    dsn: str  # redacted
    version_num: int
    version: str
    database: str
    user: str
    superuser: bool
    own_pid: int
    taken_at: float  # time.time() when the reads began
    elapsed: float  # seconds the snapshot took, connecting included
    connect_seconds: float
    sessions: tuple[Session, ...]
    locks: tuple[Lock, ...]
    settings: Mapping[str, Setting]
    overrides: tuple[Override, ...]
    slots: tuple[SlotHold, ...]
    prepared: tuple[PreparedXact, ...]
    invalid_indexes: tuple[InvalidIndex, ...]
    chains: tuple[Chain, ...] = field(default=())

    @property
    def max_connections(self) -> int:
        return _int(self.settings.get("max_connections"), 100)

    @property
    def reserved_connections(self) -> int:
        """Slots only superusers (and, PG 16+, pg_use_reserved_connections) may take."""
        return (_int(self.settings.get("superuser_reserved_connections"), 0)
                + _int(self.settings.get("reserved_connections"), 0))

    @property
    def usable_connections(self) -> int:
        return max(1, self.max_connections - self.reserved_connections)

    def client_sessions(self) -> list[Session]:
        return [s for s in self.sessions if s.is_client]

    @property
    def hidden_sessions(self) -> int:
        """Sessions of other roles whose state, waits and query this role may not read
        (PostgreSQL's own processes, hidden too, are not counted)."""
        return sum(1 for s in self.sessions if s.hidden and s.usename)

    @property
    def connections_used(self) -> int:
        """Client backends, doctor's own included (it takes a slot too)."""
        return len(self.client_sessions()) + 1

    def lock_queues(self) -> list[LockQueue]:
        return find_lock_queues(self.sessions, self.locks)

    # Gauges an exporter reads as they are (seconds; 0 when there is nothing).

    @property
    def longest_transaction(self) -> float:
        return max((s.xact_age or 0.0 for s in self.client_sessions()), default=0.0)

    @property
    def idle_in_transaction(self) -> int:
        return sum(1 for s in self.client_sessions() if s.state.startswith("idle in trans"))

    @property
    def xmin_horizon_age(self) -> float:
        """How long the oldest snapshot or prepared transaction has held vacuum back."""
        ages = [s.xact_age or s.query_age or 0.0 for s in self.sessions
                if s.xmin_age_xids is not None]
        ages += [p.age for p in self.prepared]
        return max(ages, default=0.0)


def _int(setting: Setting | None, default: int) -> int:
    try:
        return int(setting.value) if setting is not None else default
    except ValueError:
        return default


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _wait_age(queued: Queued) -> float | None:
    if queued.waiting_for is not None and queued.waiting_for.wait_age is not None:
        return queued.waiting_for.wait_age
    return queued.session.query_age


# -- blocking chains (pure: the benchmark and the tests call these on plain data) ------------

def build_chains(sessions: Sequence[Session], locks: Iterable[Lock]) -> list[Chain]:
    """Root blockers first (longest wait behind them first), each with its whole queue.

    A root is a session that blocks someone and waits for no lock itself. A session waiting
    behind two roots appears under both. Sessions in a cycle (a deadlock about to be broken)
    get the lowest pid of the cycle as their root, so nobody is lost.
    """
    by_pid = {s.pid: s for s in sessions}
    waits: dict[int, Lock] = {}
    held: dict[int, list[Lock]] = {}
    for lock in locks:
        if lock.granted:
            held.setdefault(lock.pid, []).append(lock)
        else:
            waits.setdefault(lock.pid, lock)
    blocked_by = {s.pid: s.blocked_by for s in sessions if s.blocked_by}
    blocks: dict[int, list[int]] = {}
    for pid, blockers in blocked_by.items():
        for blocker in blockers:
            blocks.setdefault(blocker, []).append(pid)
    roots = [pid for pid in blocks if not blocked_by.get(pid)]
    reached = set(_reach(roots, blocks))
    cycle_members = [pid for pid in blocked_by if pid not in reached]
    while cycle_members:  # bounded: each pass removes at least the new root's reach
        root = min(cycle_members)
        roots.append(root)
        reached |= set(_reach([root], blocks))
        cycle_members = [pid for pid in cycle_members if pid not in reached]
    chains = []
    for root in roots:
        queued = []
        for pid, depth in _reach([root], blocks).items():
            if pid == root:
                continue
            session = by_pid.get(pid) or _unknown(pid)
            queued.append(Queued(session, blocked_by.get(pid, ()), waits.get(pid), depth))
        queued.sort(key=lambda q: (q.depth, q.session.pid))
        relations = {q.waiting_for.relation for q in queued if q.waiting_for is not None}
        holds = tuple(lock for lock in held.get(root, []) if lock.relation in relations
                      or lock.locktype != "relation")
        chains.append(Chain(by_pid.get(root) or _unknown(root), holds, tuple(queued)))
    chains.sort(key=lambda c: (-c.longest_wait, -len(c.queued), c.root.pid))
    return chains


def _reach(starts: Iterable[int], blocks: Mapping[int, list[int]]) -> dict[int, int]:
    """Every pid reachable from ``starts`` along "blocks" edges, with its depth (BFS)."""
    depth: dict[int, int] = {}
    todo: deque[tuple[int, int]] = deque((pid, 0) for pid in starts)
    while todo:
        pid, d = todo.popleft()
        if pid in depth:
            continue
        depth[pid] = d
        todo.extend((nxt, d + 1) for nxt in blocks.get(pid, ()) if nxt not in depth)
    return depth


def _unknown(pid: int) -> Session:
    """A pid pg_blocking_pids names but pg_stat_activity no longer shows (it just ended), or a
    prepared transaction (pid 0)."""
    what = "prepared transaction" if pid == 0 else "gone"
    return Session(pid, "", "", "", None, None, what, what, None, None, None, None, None, None,
                   None, False, "")


def waiting_sessions(sessions: Iterable[Session]) -> int:
    """Sessions waiting for a lock another session holds: the one count blockers, watch and
    doctor show (a waiting ALTER included, and everything queued behind it)."""
    return sum(1 for s in sessions if s.blocked_by)


def find_lock_queues(sessions: Sequence[Session], locks: Iterable[Lock]) -> list[LockQueue]:
    """Each waiting ACCESS EXCLUSIVE request with at least one session queued behind it."""
    by_pid = {s.pid: s for s in sessions}
    blocked_by = {s.pid: s.blocked_by for s in sessions if s.blocked_by}
    blocks: dict[int, list[int]] = {}
    for pid, blockers in blocked_by.items():
        for blocker in blockers:
            blocks.setdefault(blocker, []).append(pid)
    found = []
    for lock in locks:
        if lock.granted or lock.mode != "AccessExclusiveLock" or lock.pid not in by_pid:
            continue
        behind = [pid for pid in _reach([lock.pid], blocks) if pid != lock.pid]
        if not behind:
            continue
        up = _reach([lock.pid], _as_lists(blocked_by))  # upwards, to the roots
        roots = tuple(by_pid.get(pid) or _unknown(pid) for pid in sorted(up)
                      if pid != lock.pid and not blocked_by.get(pid))
        found.append(LockQueue(lock.relation or lock.locktype, by_pid[lock.pid], lock, roots,
                               tuple(by_pid.get(pid) or _unknown(pid) for pid in sorted(behind))))
    found.sort(key=lambda q: -len(q.queued))
    return found


def _as_lists(blocked_by: Mapping[int, tuple[int, ...]]) -> dict[int, list[int]]:
    return {pid: list(blockers) for pid, blockers in blocked_by.items()}


# -- taking the snapshot ---------------------------------------------------------------------

def doctor_label() -> str:
    return default_label("pgsteady-doctor")


def connect(dsn: str, *, deadline: float, application_name: str | None = None,
            autocommit: bool = False) -> psycopg.Connection[Any]:
    """A labelled connection to PostgreSQL; CannotConnect, or UsageError when ``dsn`` leads
    to PgBouncer's admin console instead."""
    left = deadline - time.monotonic()
    try:
        conn = psycopg.connect(dsn, autocommit=autocommit, prepare_threshold=None,
                               application_name=application_name or doctor_label(),
                               connect_timeout=bounded_connect_timeout(dsn, left))
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CannotConnect(f"cannot connect to PostgreSQL at {redact(dsn) or 'the default'}: "
                            f"{scrub(first)}") from exc
    if (conn.info.parameter_status("server_version") or "").endswith("/bouncer"):
        conn.close()
        raise UsageError("--dsn points at PgBouncer's admin console (dbname=pgbouncer), not at "
                         "PostgreSQL; give PostgreSQL's DSN to --dsn and the admin console to "
                         "--pgbouncer")
    return conn


def take_snapshot(dsn: str, *, timeout: float = DEFAULT_TIMEOUT,
                  deadline: float | None = None, query_chars: int = QUERY_CHARS,
                  chains: bool = True, application_name: str | None = None) -> PostgresSnapshot:
    """Read everything in one READ ONLY transaction; never waits past ``deadline`` (absolute,
    ``time.monotonic()``) or ``timeout`` seconds from now. The session is labelled
    ``application_name`` (default ``pgsteady-doctor@host:pid``)."""
    started = time.monotonic()
    deadline = started + timeout if deadline is None else deadline
    taken_at = time.time()
    conn = connect(dsn, deadline=deadline, application_name=application_name)
    connected = time.monotonic()
    try:
        conn.read_only = True
        rows = _read_all(conn, deadline, query_chars)
        conn.rollback()
    except (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable) as exc:
        raise PgsteadyError(
            f"the snapshot of {redact(dsn)} did not finish within {deadline - started:.1f}s "
            f"({type(exc).__name__}); the server may be overloaded, try a longer "
            f"--timeout") from exc
    finally:
        conn.close()
    server = rows["server"][0]
    settings = {r["name"]: Setting(r["name"], r["setting"], r["reset_val"], r["unit"],
                                   r["source"], r["sourcefile"], r["sourceline"])
                for r in rows["settings"]}
    sessions = tuple(_session(r) for r in rows["sessions"])
    locks = tuple(Lock(r["pid"], r["locktype"], r["mode"], r["granted"], r["relation"],
                       r["wait_age"]) for r in rows["locks"])
    snap = PostgresSnapshot(
        dsn=redact(dsn), version_num=server["version_num"], version=server["version"],
        database=server["database"], user=server["user"], superuser=server["superuser"],
        own_pid=server["own_pid"], taken_at=taken_at, elapsed=time.monotonic() - started,
        connect_seconds=connected - started, sessions=sessions, locks=locks,
        settings=settings, overrides=tuple(Override(**r) for r in rows["overrides"]),
        slots=tuple(SlotHold(**r) for r in rows["slots"]),
        prepared=tuple(PreparedXact(**r) for r in rows["prepared"]),
        invalid_indexes=tuple(InvalidIndex(**r) for r in rows["invalid"]),
        chains=tuple(build_chains(sessions, locks)) if chains else ())
    log.debug("snapshot of %s: %d sessions, %d chains in %.3fs", snap.dsn, len(sessions),
              len(snap.chains), snap.elapsed)
    return snap


def _left(deadline: float) -> str:
    return pg_interval(max(0.001, deadline - time.monotonic()))


def _read_all(conn: psycopg.Connection[Any], deadline: float,
              query_chars: int) -> dict[str, list[dict[str, Any]]]:
    """Every read in one pipeline (one round trip; it matters on a loaded server). The
    settings come first, before doctor's own timeouts are set, so they show what a new
    session of this role in this database gets."""
    names = {"names": list(queries.SETTING_NAMES)}
    version_num = conn.info.server_version
    plan: list[tuple[str, str, Mapping[str, Any]]] = [
        ("settings", queries.SETTINGS, names),
        ("", queries.SET_TIMEOUTS, {"statement": _left(deadline),
                                    "lock": pg_interval(DOCTOR_LOCK_TIMEOUT)}),
        ("server", queries.SERVER, {}),
        ("overrides", queries.OVERRIDES, names),
        ("sessions", queries.SESSIONS, {"query_chars": query_chars}),
        ("locks", queries.locks(version_num), {}),
        ("slots", queries.REPLICATION_SLOTS, {}),
        ("prepared", queries.PREPARED_XACTS, {}),
        ("invalid", queries.INVALID_INDEXES, {}),
    ]
    cursors = []
    with conn.pipeline():
        for name, query, params in plan:
            cur = conn.cursor(row_factory=dict_row)
            cur.execute(query, params)
            cursors.append((name, cur))
    return {name: cur.fetchall() for name, cur in cursors if name}


def _session(row: Mapping[str, Any]) -> Session:
    return Session(
        row["pid"], row["database"], row["user"], row["application_name"], row["client_addr"],
        row["client_port"], row["backend_type"], row["state"], row["backend_age"],
        row["xact_age"], row["query_age"], row["state_age"], row["wait_event_type"],
        row["wait_event"], row["xmin_age_xids"], row["superuser"], scrub(row["query"]),
        tuple(row["blocked_by"] or ()), row.get("backend_start"), row.get("usename"),
        bool(row.get("hidden")))
