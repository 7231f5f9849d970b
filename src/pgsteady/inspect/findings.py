"""Doctor's checks: from a snapshot to findings that name what is wrong, who, and the fix.

Every finding has a stable kebab-case ``id`` (what alerts and CI key on), a ``severity``
(``critical`` / ``warning`` / ``info``), a one-line ``title``, ``evidence`` (the numbers and
the sessions, JSON-ready) and a ``fix`` (the exact SQL, setting or config line). Checks are
pure functions of the snapshots: no I/O, so they are cheap to test and to run in an exporter.
PgBouncer's checks live in :mod:`.findings_pgbouncer`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pgsteady import _majors
from pgsteady._docs import LOCK_QUEUE
from pgsteady.inspect.postgres import PostgresSnapshot, Session, Setting
from pgsteady.sql import text as sqltext

Severity = Literal["critical", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("critical", "warning", "info")
MAX_SESSIONS_SHOWN = 10


@dataclass(frozen=True)
class Finding:
    id: str
    severity: Severity
    title: str
    evidence: dict[str, Any]
    fix: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "title": self.title,
                "evidence": self.evidence, "fix": self.fix}


@dataclass(frozen=True)
class Thresholds:
    """Where doctor draws its lines (seconds unless named otherwise)."""

    blocked_for: float = 5.0
    long_transaction: float = 300.0
    idle_in_transaction: float = 60.0
    xmin_horizon: float = 3600.0
    connections_warning: float = 0.7
    connections_critical: float = 0.9
    keepalives_idle_max: float = 300.0
    app_deadline: float | None = None
    not_ready_warning: int = 10  # per minute, from the log
    not_ready_critical: int = 60
    dropped_cancels_warning: int = 10
    pool_busy: float = 0.7  # sv_active / pool_size with clients waiting
    pool_maxwait: float = 1.0
    server_login_retry: float = 5.0  # PgBouncer's wait after a failed login, at most
    ignore_pids: frozenset[int] = field(default_factory=frozenset)


def rank(finding: Finding) -> tuple[int, str]:
    return (SEVERITIES.index(finding.severity), finding.id)


def at_least(findings: Iterable[Finding], severity: Severity) -> list[Finding]:
    """Findings at ``severity`` or worse."""
    limit = SEVERITIES.index(severity)
    return [f for f in findings if SEVERITIES.index(f.severity) <= limit]


def age_text(seconds: float | None) -> str:
    """``1.5s``, ``4m05s``, ``7h02m``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def plural(count: int, noun: str) -> str:
    """``1 session``, ``2 sessions``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def who(session: Session) -> str:
    """``pid 123 'dashboard-logs' (user app, 10.0.0.5:4312)``."""
    where = ", ".join(p for p in (f"user {session.user}" if session.user else "",
                                  session.client) if p)
    return f"pid {session.pid} '{session.label}'" + (f" ({where})" if where else "")


def _sessions(sessions: Sequence[Session]) -> list[dict[str, Any]]:
    return [s.as_dict() for s in sessions[:MAX_SESSIONS_SHOWN]]


# -- PostgreSQL --------------------------------------------------------------------------------

def postgres_findings(snap: PostgresSnapshot, th: Thresholds | None = None) -> list[Finding]:
    """Every PostgreSQL check, most severe first."""
    th = th or Thresholds()
    found: list[Finding] = []
    for check in _PG_CHECKS:
        found.extend(check(snap, th))
    return sorted(found, key=rank)


def _lock_queue(snap: PostgresSnapshot, th: Thresholds) -> list[Finding]:
    found = []
    for q in snap.lock_queues():
        root = q.roots[0] if q.roots else None
        behind = f", which waits behind {who(root)}" if root else ""
        cancel = f"SELECT pg_cancel_backend({q.waiter.pid});"
        fix = (f"{cancel}  -- the waiting {waiting_statement(q.waiter.query)}: the queue "
               f"drains at once (or: pgsteady blockers --cancel {q.waiter.pid}); "
               f"retry it later with SET lock_timeout = '5s' (pgsteady migrate does)")
        if root is not None:
            fix += (f"\nSELECT pg_terminate_backend({root.pid});  -- the root blocker "
                    f"'{root.label}', if it should not be running "
                    f"(or: pgsteady blockers --terminate {root.pid})")
        found.append(Finding(
            "lock-queue", "critical",
            f"{plural(q.waiting, 'session')} waiting on {q.relation}: pid {q.waiter.pid} waits "
            f"for ACCESS EXCLUSIVE{behind}, {len(q.queued)} more queue behind it",
            {"relation": q.relation, "waiting_total": q.waiting, "queued_total": len(q.queued),
             "waiting_for_access_exclusive": {**q.waiter.as_dict(),
                                              "wait_age_s": _r(q.waiter_lock.wait_age)},
             "roots": [s.as_dict() for s in q.roots], "queued": _sessions(q.queued)},
            fix))
    return found


def _verb(query: str) -> str:
    words = query[sqltext.skip_blanks(query):].split()[:2]
    return " ".join(words).upper() if words else "statement"


# Statements that take a lock strong enough to queue a whole table (ACCESS EXCLUSIVE, or
# SHARE for CREATE INDEX): the one a lock queue's waiter is running, among several.
_STRONG = re.compile(r"(ALTER|DROP|TRUNCATE|LOCK|REINDEX|CLUSTER|VACUUM\s+FULL|REFRESH|"
                     r"CREATE\s+(UNIQUE\s+)?INDEX)\b", re.IGNORECASE)


def waiting_statement(query: str) -> str:
    """The statement of ``query`` (pg_stat_activity's text, maybe several statements sent at
    once) that waits for the lock, in two words (``ALTER TABLE``); when it cannot be told,
    says it is one of several."""
    statements = [c.text[sqltext.skip_blanks(c.text):] for c in sqltext.split(query)]
    statements = [text for text in statements if text.strip()]
    if len(statements) <= 1:
        return _verb(query)
    strong = [text for text in statements if _STRONG.match(text)]
    if len(strong) == 1:
        return f"{_verb(strong[0])} (one of the {len(statements)} statements it sent)"
    shown = ", ".join(_verb(text) for text in (strong or statements)[:3])
    return f"statement, one of the {len(statements)} it sent ({shown}, ...)"


def _blocking_chain(snap: PostgresSnapshot, th: Thresholds) -> list[Finding]:
    in_queues = {s.pid for q in snap.lock_queues() for s in (*q.roots, q.waiter)}
    found = []
    for chain in snap.chains:
        if chain.root.pid in in_queues or chain.longest_wait < th.blocked_for:
            continue
        root = chain.root
        found.append(Finding(
            "blocking-chain", "warning",
            f"{who(root)} blocks {plural(len(chain.queued), 'session')}; the longest has waited "
            f"{age_text(chain.longest_wait)}",
            {"root": root.as_dict(),
             "holds": [{"mode": lock.mode, "relation": lock.relation} for lock in chain.holds],
             "queued_total": len(chain.queued),
             "queued_per_relation": chain.queued_per_relation(),
             "queued": _sessions([q.session for q in chain.queued])},
            f"SELECT pg_cancel_backend({root.pid});  -- ends its statement; or, if it is idle "
            f"in a transaction or should not be running: SELECT pg_terminate_backend("
            f"{root.pid}); (pgsteady blockers --terminate {root.pid})"))
    return found


def _long_transaction(snap: PostgresSnapshot, th: Thresholds) -> list[Finding]:
    long = sorted((s for s in snap.client_sessions()
                   if s.xact_age is not None and s.xact_age >= th.long_transaction),
                  key=lambda s: -(s.xact_age or 0))
    if not long:
        return []
    oldest = long[0]
    return [Finding(
        "long-transaction", "warning",
        f"{plural(len(long), 'transaction')} open longer than {age_text(th.long_transaction)}; the "
        f"oldest, {who(oldest)}, for {age_text(oldest.xact_age)}",
        {"count": len(long), "threshold_s": th.long_transaction, "sessions": _sessions(long)},
        f"SELECT pg_cancel_backend({oldest.pid});  -- or pg_terminate_backend if it is idle "
        f"in its transaction; then bound such queries: ALTER ROLE <role> SET "
        f"statement_timeout = '60s'")]


def _idle_in_transaction(snap: PostgresSnapshot, th: Thresholds) -> list[Finding]:
    idle = sorted((s for s in snap.client_sessions() if s.state.startswith("idle in trans")
                   and (s.state_age or 0) >= th.idle_in_transaction),
                  key=lambda s: -(s.state_age or 0))
    if not idle:
        return []
    oldest = idle[0]
    return [Finding(
        "idle-in-transaction", "warning",
        f"{plural(len(idle), 'session')} idle in an open transaction longer than "
        f"{age_text(th.idle_in_transaction)}; the oldest, {who(oldest)}, for "
        f"{age_text(oldest.state_age)}",
        {"count": len(idle), "threshold_s": th.idle_in_transaction,
         "sessions": _sessions(idle)},
        f"SELECT pg_terminate_backend({oldest.pid});  -- it holds its locks and snapshot while "
        f"doing nothing; then: ALTER DATABASE {_quote(snap.database)} SET "
        f"idle_in_transaction_session_timeout = '60s'")]


def _xmin_horizon(snap: PostgresSnapshot, th: Thresholds) -> list[Finding]:
    holders: list[dict[str, Any]] = []
    backends = sorted((s for s in snap.sessions if s.xmin_age_xids is not None
                       and (s.xact_age or s.query_age or 0) >= th.xmin_horizon),
                      key=lambda s: -(s.xmin_age_xids or 0))
    holders += [{"kind": "session", **s.as_dict(), "xmin_age_xids": s.xmin_age_xids}
                for s in backends[:MAX_SESSIONS_SHOWN]]
    holders += [{"kind": "prepared transaction", "gid": p.gid, "owner": p.owner,
                 "database": p.database, "age_s": _r(p.age), "xmin_age_xids": p.xid_age}
                for p in snap.prepared if p.age >= th.xmin_horizon]
    holders += [{"kind": "replication slot", "slot_name": s.slot_name, "active": s.active,
                 "slot_type": s.slot_type, "xmin_age_xids": s.xmin_age_xids,
                 "catalog_xmin_age_xids": s.catalog_xmin_age_xids}
                for s in snap.slots if not s.active]
    if not holders:
        return []
    first = holders[0]
    if first["kind"] == "session":
        name = f"pid {first['pid']} '{first['application_name'] or 'no application_name'}'"
        fix = (f"SELECT pg_terminate_backend({first['pid']});  -- its snapshot is what vacuum "
               f"waits for; then bound it: statement_timeout / idle_in_transaction_session_timeout")
        held = age_text(first["xact_age_s"] or first["query_age_s"])
    elif first["kind"] == "prepared transaction":
        name = f"prepared transaction '{first['gid']}'"
        fix = f"COMMIT PREPARED '{first['gid']}';  -- or ROLLBACK PREPARED, once you know which"
        held = age_text(first["age_s"])
    else:
        name = f"inactive replication slot '{first['slot_name']}'"
        fix = f"SELECT pg_drop_replication_slot('{first['slot_name']}');  -- if nothing uses it"
        held = f"{first['xmin_age_xids'] or first['catalog_xmin_age_xids']} transactions"
    return [Finding(
        "xmin-horizon", "warning",
        f"vacuum held back for {held} by {name}",
        {"threshold_s": th.xmin_horizon, "holders": holders}, fix)]


def _connections(snap: PostgresSnapshot, th: Thresholds) -> list[Finding]:
    used, usable = snap.connections_used, snap.usable_connections
    share = used / usable
    if share < th.connections_warning:
        return []
    groups = Counter((s.application_name, s.user, s.client_addr or "local")
                     for s in snap.client_sessions())
    severity: Severity = "critical" if share >= th.connections_critical else "warning"
    return [Finding(
        "connections-saturated", severity,
        f"{used} of {usable} usable connection slots in use ({share:.0%})",
        {"used": used, "usable": usable, "max_connections": snap.max_connections,
         "reserved": snap.reserved_connections,
         "idle": sum(1 for s in snap.client_sessions() if s.state == "idle"),
         "top": [{"application_name": a, "user": u, "client": c, "sessions": n}
                 for (a, u, c), n in groups.most_common(5)]},
        "find who holds them (top above); put PgBouncer in front of many small clients; and "
        + _drop_dead_sessions(snap))]


def _checks_clients(snap: PostgresSnapshot) -> bool:
    """client_connection_check_interval: the server notices a killed client while its query
    waits; before it nothing drops such a session until its query ends."""
    return _majors.supports(_majors.major_of(snap.version_num),
                            _majors.CLIENT_CONNECTION_CHECK_INTERVAL)


def _drop_dead_sessions(snap: PostgresSnapshot) -> str:
    if _checks_clients(snap):
        return ("drop sessions whose client is gone: client_connection_check_interval = '10s' "
                "(PostgreSQL 14+)")
    return ("bound how long a killed client's session can wait: lock_timeout and "
            "statement_timeout (this server cannot drop it sooner: "
            "client_connection_check_interval needs PostgreSQL 14+)")




def _reserved_slots(snap: PostgresSnapshot, th: Thresholds) -> list[Finding]:
    if snap.reserved_connections == 0:
        return [Finding(
            "no-reserved-slots", "warning",
            "no connection slots are reserved: when applications use them all, nobody can "
            "connect to investigate",
            {"superuser_reserved_connections": 0, "max_connections": snap.max_connections},
            "superuser_reserved_connections = 3  # postgresql.conf; restart needed"
            + ("\nreserved_connections = 3  # PostgreSQL 16+: also for the on-call role, "
               "with GRANT pg_use_reserved_connections TO oncall;"
               if _majors.supports(_majors.major_of(snap.version_num),
                                  _majors.RESERVED_CONNECTIONS) else ""))]
    clients = [s for s in snap.client_sessions() if s.pid not in th.ignore_pids]
    supers = [s for s in clients if s.superuser]
    if clients and len(supers) * 2 > len(clients):
        return [Finding(
            "no-reserved-slots", "info",
            f"{len(supers)} of {len(clients)} sessions are superusers: reserved slots do not "
            f"keep a seat free from them",
            {"reserved": snap.reserved_connections, "superuser_sessions": len(supers),
             "users": sorted({s.user for s in supers})},
            "connect applications as ordinary roles (CREATE ROLE app LOGIN ...), keep "
            "superusers for people")]
    return []


def _invalid_indexes(snap: PostgresSnapshot, th: Thresholds) -> list[Finding]:
    broken = [i for i in snap.invalid_indexes if not i.building]
    if not broken:
        return []
    return [Finding(
        "invalid-index", "warning",
        f"{len(broken)} INVALID index(es), left by a failed CREATE INDEX CONCURRENTLY: written "
        f"on every change, never used",
        {"indexes": [{"index": f"{i.schema}.{i.index}", "table": i.table, "bytes": i.bytes}
                     for i in broken]},
        "\n".join(f"DROP INDEX CONCURRENTLY {_quote(i.schema)}.{_quote(i.index)};  -- then "
                  f"build it again CONCURRENTLY" for i in broken))]


def _quote(name: str) -> str:
    plain = name.isidentifier() and name.islower() and name.isascii()
    return name if plain else '"' + name.replace('"', '""') + '"'


def _unlabelled(snap: PostgresSnapshot, th: Thresholds) -> list[Finding]:
    bare = [s for s in snap.client_sessions()
            if not s.application_name and s.pid not in th.ignore_pids]
    if not bare:
        return []
    groups = Counter((s.user, s.client_addr or "local") for s in bare)
    return [Finding(
        "unlabelled-sessions", "warning",
        f"{plural(len(bare), 'session')} without an application_name: in an incident nobody "
        f"can tell whose they are",
        {"count": len(bare), "by_user_and_client": [
            {"user": u, "client": c, "sessions": n} for (u, c), n in groups.most_common(5)],
         "pids": [s.pid for s in bare[:20]]},
        "give every service's connections a label, e.g. application_name=orders-api@web-3:812 "
        "in the DSN (pgsteady.Database sets service@host:pid)")]


# -- settings ------------------------------------------------------------------------------------

def _overrides_of(snap: PostgresSnapshot, name: str) -> list[dict[str, str]]:
    return [{"database": o.database or "*", "role": o.role or "*", "value": o.value}
            for o in snap.overrides if o.name == name]


def _setting_finding(snap: PostgresSnapshot, fid: str, names: Sequence[str],
                     bad: Callable[[dict[str, Setting]], bool], *, title: str,
                     fix: str) -> list[Finding]:
    settings = {n: snap.settings[n] for n in names if n in snap.settings}
    if len(settings) != len(names) or not bad(settings):
        return []
    overrides = [o for n in names for o in _overrides_of(snap, n)]
    evidence: dict[str, Any] = {n: {"value": s.value + s.unit, "configured": s.configured
                                    + s.unit, "source": s.where()} for n, s in settings.items()}
    evidence["overrides"] = overrides
    evidence["seen_as"] = {"database": snap.database, "user": snap.user}
    # Set for some databases or roles only: worth knowing, but those may be the app's ones.
    severity: Severity = "info" if overrides else "warning"
    suffix = " (set for some databases/roles only)" if overrides else ""
    return [Finding(fid, severity, title + suffix, evidence, fix)]


def _zero(name: str) -> Callable[[dict[str, Setting]], bool]:
    return lambda s: s[name].value in ("0", "-1", "off")


def _settings(snap: PostgresSnapshot, th: Thresholds) -> list[Finding]:
    db = _quote(snap.database)
    found = []
    found += _setting_finding(
        snap, "setting-statement-timeout", ["statement_timeout"], _zero("statement_timeout"),
        title="statement_timeout is 0: a runaway query runs (and holds its locks) for hours",
        fix=f"ALTER DATABASE {db} SET statement_timeout = '60s';  -- a backstop; services set "
        f"shorter ones (or statement_timeout = '60s' in postgresql.conf)")
    found += _setting_finding(
        snap, "setting-lock-timeout", ["lock_timeout"], _zero("lock_timeout"),
        title="lock_timeout is 0: a DDL waiting for its lock queues every query on the table "
        "behind it, without limit",
        fix=f"ALTER DATABASE {db} SET lock_timeout = '5s';  -- migrations retry "
        f"(pgsteady migrate); or lock_timeout = '5s' in postgresql.conf")
    found += _setting_finding(
        snap, "setting-idle-in-transaction-timeout", ["idle_in_transaction_session_timeout"],
        _zero("idle_in_transaction_session_timeout"),
        title="idle_in_transaction_session_timeout is 0: a forgotten open transaction holds its "
        "locks and snapshot forever",
        fix=f"ALTER DATABASE {db} SET idle_in_transaction_session_timeout = '60s';  -- or in "
        f"postgresql.conf")
    if _checks_clients(snap):
        found += _setting_finding(
            snap, "setting-client-connection-check-interval",
            ["client_connection_check_interval"], _zero("client_connection_check_interval"),
            title="client_connection_check_interval is 0: sessions of killed clients stay (and "
            f"keep their slot) until their query ends — the restart leak in {LOCK_QUEUE}",
            fix="client_connection_check_interval = '10s'  # PostgreSQL 14+; postgresql.conf, "
            "then SELECT pg_reload_conf();")
    else:  # the leak has no server-side fix here: say so once, and what bounds it instead
        found.append(Finding(
            "setting-client-connection-check-interval", "info",
            f"PostgreSQL {_majors.major_of(snap.version_num)} keeps the sessions of killed "
            f"clients (and their slots) until their query ends — the restart leak in {LOCK_QUEUE}; "
            f"client_connection_check_interval, which drops them, needs PostgreSQL 14+",
            {"version_num": snap.version_num,
             "needs": _majors.version_num_of(_majors.CLIENT_CONNECTION_CHECK_INTERVAL)},
            "upgrade to PostgreSQL 14+ and set client_connection_check_interval = '10s'; until "
            "then keep lock_timeout and statement_timeout set, so a dead client's wait ends"))
    keep = ["tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count"]

    def slow_keepalive(s: dict[str, Setting]) -> bool:
        idle = s["tcp_keepalives_idle"]
        return idle.configured == "0" or _num(idle.value) > th.keepalives_idle_max \
            or _num(idle.configured) > th.keepalives_idle_max

    found += _setting_finding(
        snap, "setting-tcp-keepalives", keep, slow_keepalive,
        title="TCP keepalives use the OS default (2 hours idle on Linux): a vanished client's "
        "session is noticed hours late",
        fix="tcp_keepalives_idle = 60\ntcp_keepalives_interval = 10\ntcp_keepalives_count = 6"
        "  # postgresql.conf, then SELECT pg_reload_conf();")
    found += _setting_finding(
        snap, "setting-log-lock-waits", ["log_lock_waits"], _zero("log_lock_waits"),
        title="log_lock_waits is off: lock waits longer than deadlock_timeout leave no trace",
        fix="log_lock_waits = on  # postgresql.conf, then SELECT pg_reload_conf();")
    found += _setting_finding(
        snap, "setting-log-min-duration-statement", ["log_min_duration_statement"],
        _zero("log_min_duration_statement"),
        title="log_min_duration_statement is -1: slow queries are never logged",
        fix="log_min_duration_statement = '1s'  # postgresql.conf, then SELECT pg_reload_conf();")
    return found


def _num(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


_PG_CHECKS: tuple[Callable[[PostgresSnapshot, Thresholds], list[Finding]], ...] = (
    _lock_queue, _blocking_chain, _long_transaction, _idle_in_transaction, _xmin_horizon,
    _connections, _reserved_slots, _invalid_indexes, _unlabelled, _settings,
)
