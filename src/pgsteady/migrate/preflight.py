"""Before migrating: which live sessions would block the pending statements, by name.

For each pending statement, the relations it locks and the modes come from
:mod:`~pgsteady.sql.analysis` and :mod:`~pgsteady.migrate.resolve` (foreign keys' other
tables, partitions, an index's table); ``pg_locks`` x ``pg_stat_activity`` then gives the
sessions that hold or wait for a conflicting lock there. A session idle in an open
transaction holds its locks until it commits, so it is a blocker at any age; an active query
younger than ``min_age`` (a 5 ms read about to finish) is looked at again once ``min_age``
has passed instead of being ignored. Each blocking session is listed once: its strongest
conflicting lock, on the table rather than on one of its indexes. ``CREATE INDEX
CONCURRENTLY`` also waits for every old snapshot in the database, so those sessions count
too. The same lookup names the likely blocker after a try that ran into ``lock_timeout``.

A statement whose text does not show its locks (``DO``, ``CALL``: :mod:`~pgsteady.migrate.
opaque`) is read as far as it can be (a ``DO`` block's static SQL and literal ``EXECUTE``
strings are checked like any statement); what stays out of sight is listed in
:attr:`Report.unknown`, so ``pgsteady preflight`` does not say ok for it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row

from pgsteady.migrate import queries
from pgsteady.migrate.source import Migration
from pgsteady.settings import scrub
from pgsteady.sql.locks import LockMode, Target
from pgsteady.sql.text import shorten

if TYPE_CHECKING:  # the analysis (pglast's trees) is imported when a statement needs it
    from pgsteady.sql import opaque
    from pgsteady.sql.analysis import StatementInfo

log = logging.getLogger("pgsteady.migrate")

QUERY_CHARS = 200
RESAMPLE_MARGIN = 0.02
IDLE_IN_TRANSACTION = frozenset({"idle in transaction", "idle in transaction (aborted)"})
SNAPSHOT_WAITERS = frozenset({"CREATE INDEX CONCURRENTLY", "REINDEX TABLE CONCURRENTLY",
                               "REINDEX INDEX CONCURRENTLY", "DETACH PARTITION CONCURRENTLY"})


@dataclass(frozen=True)
class Session:
    """A session as an operator needs to see it to decide what to do about it."""

    pid: int
    application_name: str
    usename: str
    client_addr: str | None
    state: str
    xact_age: float | None
    query_age: float | None
    query: str

    def describe(self) -> str:
        label = self.application_name or "no application_name"
        parts = [f"user {self.usename}" if self.usename else "",
                 f"from {self.client_addr}" if self.client_addr else "",
                 self.state, _age("transaction open", self.xact_age),
                 _age("last query started", self.query_age, " ago")]
        return f"pid {self.pid} '{label}' (" + ", ".join(p for p in parts if p) + ")"


@dataclass(frozen=True)
class Need:
    """A pending statement needs ``lock`` on an existing relation."""

    relation_oid: int
    relation: str
    lock: LockMode
    where: str  # file:line
    kind: str
    via: str = ""  # why a relation the statement does not name is locked too
    is_index: bool = False


@dataclass(frozen=True)
class Blocker:
    """A session in the way of a pending statement, and why."""

    session: Session
    reason: str  # "holds", "waits for" or "old snapshot"
    lock_mode: str | None  # pg_locks.mode it holds or waits for
    relation: str | None
    need: Need | None

    def describe(self, *, query_chars: int = 0) -> str:
        """One line; with ``query_chars``, ends with the start of the session's query."""
        if self.reason == "old snapshot":
            what = "holds a snapshot CREATE INDEX CONCURRENTLY must wait out"
        elif self.lock_mode is None:  # seen further back in a chain of waiters
            what = self.reason
        else:
            what = f"{self.reason} {self.lock_mode} on {self.relation}"
            if self.need is not None and self.need.via:  # a table the statement does not name
                what += f" ({self.need.via})"
        if self.need is not None:
            what += f"; {self.need.where} {self.need.kind} needs {self.need.lock}"
        query = self.session.query
        if query_chars and query:
            excerpt = shorten(query, query_chars)  # the query was scrubbed whole already
            what += f"; its query: {excerpt}"
        return f"{self.session.describe()} {what}"

    def as_dict(self) -> dict[str, Any]:
        s = self.session
        return {
            "pid": s.pid, "application_name": s.application_name, "usename": s.usename,
            "client_addr": s.client_addr, "state": s.state,
            "xact_age_s": _round(s.xact_age), "query_age_s": _round(s.query_age),
            "query": s.query, "reason": self.reason, "lock_mode": self.lock_mode,
            "relation": self.relation,
            "needed_by": None if self.need is None else {
                "where": self.need.where, "kind": self.need.kind, "lock": str(self.need.lock),
                "via": self.need.via or None},
        }


@dataclass(frozen=True)
class Unknown:
    """A pending statement whose locks preflight cannot know, and why."""

    file: str
    line: int
    kind: str
    why: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def describe(self) -> str:
        return f"{self.where} {self.kind}: {self.why}"

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "kind": self.kind, "why": self.why}


@dataclass
class Report:
    """What preflight found: the pending migrations, who is in their way, and the
    statements whose locks it cannot know."""

    pending: list[Migration]
    blockers: list[Blocker] = field(default_factory=list)
    unknown: list[Unknown] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No session found in the way. ``migrate`` asks only this: its lock_timeout stops
        it at a lock preflight could not foresee; ``pgsteady preflight`` asks :attr:`clear`."""
        return not self.blockers

    @property
    def clear(self) -> bool:
        """No session in the way, and every pending statement's locks known."""
        return self.ok and not self.unknown

    def summary(self) -> str:
        """One line for an error message: every blocking session, and what to do."""
        sessions = {b.session.pid: b for b in self.blockers}
        named = "; ".join(b.describe() for b in sessions.values())
        return (f"preflight: {len(sessions)} session(s) would block the pending migrations: "
                f"{named}. Wait for them to finish, or {self.what_to_end()}, then run again")

    def what_to_end(self) -> str:
        """Which sessions to end: those holding what is needed. The ones waiting in the
        queue behind them are their victims and go on once they are gone (a waiter is named
        only when no holder is: its own blocker's lock does not conflict with ours)."""
        sessions = {b.session.pid: b for b in self.blockers}
        holders = sorted(pid for pid, b in sessions.items() if b.reason != "waits for")
        waiting = len(sessions) - len(holders)
        pids = ", ".join(str(pid) for pid in (holders or sorted(sessions)))
        behind = (f"; the {waiting} waiting behind them go on once they are gone"
                  if holders and waiting else "")
        return (f"end the ones in the way with SELECT pg_terminate_backend(pid) (pid {pids}) "
                f"or pgsteady blockers --terminate{behind}")


def _age(label: str, seconds: float | None, suffix: str = "") -> str:
    """``transaction open 1.5s``, ``... 7h02m``; empty when unknown."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{label} {seconds:.1f}s{suffix}"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    span = f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
    return f"{label} {span}{suffix}"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


HIDDEN = "state hidden from this role (pg_monitor or pg_read_all_stats shows it)"


def _session(row: dict[str, Any]) -> Session:
    # Another role's session, to a role without pg_monitor: no state, no transaction start.
    hidden = not row["state"] and row["xact_age"] is None
    return Session(row["pid"], row["application_name"], row["usename"],
                   row["client_addr"], HIDDEN if hidden else row["state"], row["xact_age"],
                   row["query_age"], "" if hidden
                   else shorten(scrub(row["query"]), QUERY_CHARS))  # masked first, then cut


def _readings(migration: Migration) -> dict[int, tuple[StatementInfo, opaque.Reading]]:
    """By position in the migration: each statement whose locks the oracle's targets would
    not show (loading analysed those already, so plain statements stay unparsed here, and a
    folder of plain statements never imports the reader, nor pglast's AST with it)."""
    analysed = [(i, part.info) for i, part in enumerate(migration.parts) if part.info is not None]
    if not analysed:
        return {}
    from pgsteady.sql import opaque  # noqa: PLC0415 - only when needed

    return {i: (info, opaque.read(info)) for i, info in analysed if opaque.needs_reading(info)}


def read_statements(migration: Migration) -> list[tuple[StatementInfo, opaque.Reading | None]]:
    """Each statement, with what a reading of it found when its targets alone would hide its
    locks (a DO block's statements and why the rest is unknown): what ``--plan`` shows, read
    as preflight reads it. Text only: functions and triggers need the database."""
    from pgsteady.sql import opaque  # noqa: PLC0415 - only when needed

    return [(s, opaque.read(s) if opaque.needs_reading(s) else None)
            for s in migration.statements]


def _unknown(migration: Migration,
             readings: Iterable[tuple[StatementInfo, opaque.Reading]]) -> list[Unknown]:
    """Why some of the migration's locks are unknown, from its text alone."""
    file = str(migration.path)
    return [Unknown(file, line, statement.kind, why) for statement, reading in readings
            for line, why in reading.unknown]


_CREATES_CODE = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:CONSTRAINT\s+)?"
                           r"(?:FUNCTION|PROCEDURE|TRIGGER)\b", re.IGNORECASE)


def _follows(conn: psycopg.Connection[Any], pending: Sequence[Migration],
             readings: Sequence[dict[int, tuple[StatementInfo, opaque.Reading]]]) -> bool:
    """Whether a statement may run a function or trigger whose body must be read: the
    database has some, the pending text creates some, or a statement analysed already (a DO
    block, a CALL) calls one (a database with none of its own, migrated by plain statements,
    is not analysed for it)."""
    if any(s.calls for read in readings for _, r in read.values() for s in r.statements) or \
            any(part.info is not None and part.info.calls for m in pending for part in m.parts):
        return True
    if any(_CREATES_CODE.search(m.sql) for m in pending):
        return True
    row = conn.execute(queries.USER_CODE).fetchone()  # any trigger or function to read
    return bool(row and row[0])


def _followed(conn: psycopg.Connection[Any], pending: Sequence[Migration],
              readings: Sequence[dict[int, tuple[StatementInfo, opaque.Reading]]],
              report: Report) -> list[list[StatementInfo]]:
    """Each migration's statements, a DO block's in its place, each followed by what the
    functions it calls and the triggers it fires run; what cannot be read goes to
    ``report.unknown``."""
    from pgsteady.migrate import bodies  # noqa: PLC0415 - only when needed

    follower = bodies.Follower(conn)
    follower.prefetch(name for m in pending for s in m.statements for name in s.calls)
    follower.prefetch_writes(w for m in pending for s in m.statements for w in s.writes)
    out: list[list[StatementInfo]] = []
    for migration, read in zip(pending, readings, strict=True):
        statements: list[StatementInfo] = []
        unknown: dict[tuple[int, str, str], None] = {}
        for i, statement in enumerate(migration.statements):
            for inner in read[i][1].statements if i in read else [statement]:
                found = follower.follow(inner)
                statements += [inner, *found.statements]
                unknown.update(dict.fromkeys((line, statement.kind, why)
                                             for line, why in found.unknown))
            follower.learn(statement)
        report.unknown += [Unknown(str(migration.path), *u) for u in unknown]
        out.append(statements)
    return out


def lookup(conn: psycopg.Connection[Any], statements: Iterable[StatementInfo]) \
        -> dict[str, Any]:
    """Every relation the statements name, resolved in one round trip (300 migrations' worth
    of names cost one query, not one each); what :func:`resolve` takes as ``known``."""
    from pgsteady.migrate import resolve as resolving  # noqa: PLC0415 - only when needed

    return resolving.prefetch(conn, [t for s in statements for t in _waits_for(s)])


def resolve(conn: psycopg.Connection[Any], migration: Migration | None,
            statements: Iterable[StatementInfo], where: str = "",
            known: dict[str, Any] | None = None) -> list[Need]:
    """The existing relations the statements lock (an index's table too), with modes.
    ``known`` is a :func:`lookup` made beforehand for many migrations at once."""
    from pgsteady.migrate import resolve as resolving  # noqa: PLC0415 - only when needed

    needs: list[Need] = []
    statements = list(statements)
    if known is None:
        known = lookup(conn, statements)
    for statement in statements:
        place = migration.where(statement) if migration is not None else where
        for locked in resolving.relations(conn, _waits_for(statement), known):
            needs.append(Need(locked.oid, locked.relation, locked.lock, place, statement.kind,
                              locked.via, locked.index_of is not None))
    return needs


def _waits_for(statement: StatementInfo) -> list[Target]:
    """The statement's targets, plus what a concurrent index build waits out: writers."""
    targets = list(statement.targets)
    if statement.kind in SNAPSHOT_WAITERS:
        # After taking SHARE UPDATE EXCLUSIVE it waits for every transaction holding a lock
        # that conflicts with SHARE (any writer), then for old snapshots.
        targets += [Target(t.schema, t.name, LockMode.SHARE) for t in statement.targets]
    return targets


def blockers_for(conn: psycopg.Connection[Any], needs: Sequence[Need], *,
                 min_age: float) -> list[Blocker]:
    """Sessions holding or waiting for a lock that conflicts with one of ``needs``.

    One entry per session; a session idle in a transaction counts at any age, others only
    once their transaction (or their wait) is ``min_age`` old."""
    return _lockers(conn, needs, min_age=min_age)[0]


def _lockers(conn: psycopg.Connection[Any], needs: Sequence[Need], *,
             min_age: float) -> tuple[list[Blocker], float]:
    """(blockers, how long until the youngest conflicting active session is min_age old)."""
    if not needs:
        return [], 0.0
    by_oid: dict[int, list[Need]] = {}
    for need in needs:
        by_oid.setdefault(need.relation_oid, []).append(need)
    best: dict[int, tuple[tuple[int, int], Blocker]] = {}
    young_for = 0.0
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(queries.RELATION_LOCKERS,
                           {"oids": list(by_oid), "query_chars": QUERY_CHARS}).fetchall()
    for row in rows:
        try:
            held = LockMode.from_pg_name(row["mode"])
        except ValueError:
            continue
        conflicting = [n for n in by_oid[row["relation_oid"]] if n.lock.conflicts_with(held)]
        if not conflicting:
            continue
        age = row["xact_age"] if row["granted"] else (row["wait_age"] or row["query_age"])
        idle = row["granted"] and row["state"] in IDLE_IN_TRANSACTION
        # No age: pg_stat_activity hides another role's session from a role without
        # pg_monitor, but pg_locks still shows its lock. In the way at any age we cannot see.
        if not idle and age is not None and age < min_age:
            young_for = max(young_for, min_age - (age or 0.0))
            continue
        need = max(conflicting, key=lambda n: n.lock.level)
        # Prefer the table over its indexes, then the strongest lock held.
        rank = (0 if need.is_index else 1, held.level)
        known = best.get(row["pid"])
        if known is None or rank > known[0]:
            best[row["pid"]] = (rank, Blocker(
                _session(row), "holds" if row["granted"] else "waits for", row["mode"],
                need.relation, need))
    return [blocker for _, blocker in best.values()], young_for


def _anyone_locks(conn: psycopg.Connection[Any]) -> bool:
    """Whether another session holds or awaits a relation lock in this database now (what
    :data:`~pgsteady.migrate.queries.RELATION_LOCKERS` would find, for any relation)."""
    row = conn.execute(queries.ANY_RELATION_LOCKER).fetchone()
    return bool(row and row[0])


def old_snapshots(conn: psycopg.Connection[Any], *, min_age: float) -> list[Session]:
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(queries.OLD_SNAPSHOTS,
                           {"min_age": min_age, "query_chars": QUERY_CHARS}).fetchall()
    return [_session(row) for row in rows]


def check(conn: psycopg.Connection[Any], pending: Sequence[Migration], *,
          min_age: float = 1.0, unknown: bool = True) -> Report:
    """Preflight the pending migrations; the report names every session in their way.

    ``unknown=False``: only :attr:`Report.ok` is asked (``migrate``'s own preflight), so on a
    database where nobody holds a lock, no function body or trigger is read for
    :attr:`Report.unknown` (it then lists only what the text shows)."""
    report = Report(list(pending))
    needs: list[Need] = []
    readings = [_readings(m) for m in pending]
    for migration, read in zip(pending, readings, strict=True):
        # From the text alone: unknown whether or not anyone holds a lock right now.
        report.unknown += _unknown(migration, read.values())
    anyone = _anyone_locks(conn)
    # Functions and triggers: whether or not anyone holds a lock right now, for what is
    # unknown; when someone does, for what they lock.
    followed = _followed(conn, pending, readings, report) \
        if (unknown or anyone) and _follows(conn, pending, readings) else None
    order = {str(m.path): i for i, m in enumerate(pending)}
    report.unknown.sort(key=lambda u: (order.get(u.file, 0), u.line))
    if anyone:  # else nobody can be in the way: no need to analyse or resolve
        # A DO block's statements stand in its place; what is unknown adds no need.
        readable = list(zip(pending, followed, strict=True)) if followed is not None else \
            [(m, [s for i, statement in enumerate(m.statements)
                  for s in (read[i][1].statements if i in read else [statement])])
             for m, read in zip(pending, readings, strict=True)]
        known = lookup(conn, [s for _, statements in readable for s in statements])
        needs = [need for m, statements in readable
                 for need in resolve(conn, m, statements, known=known)]
    blockers, young_for = _lockers(conn, needs, min_age=min_age)
    if young_for > 0:
        # Young active queries are not ignored: if they still hold a conflicting lock once
        # min_age has passed, they are long enough to be in the way. One look more, bounded.
        time.sleep(min(young_for, min_age) + RESAMPLE_MARGIN)
        again, _ = _lockers(conn, needs, min_age=min_age)
        named = {b.session.pid for b in blockers}
        blockers += [b for b in again if b.session.pid not in named]
    report.blockers += blockers
    # (such statements cannot run in a transaction: only no-transaction migrations hold them)
    waiting = [(m, s) for m in pending if not m.transactional
               for s in m.statements if s.kind in SNAPSHOT_WAITERS]
    if waiting:
        migration, statement = waiting[0]
        named = {b.session.pid for b in report.blockers}
        for session in old_snapshots(conn, min_age=min_age):
            if session.pid not in named:
                report.blockers.append(Blocker(session, "old snapshot", None, None, Need(
                    0, "", LockMode.SHARE_UPDATE_EXCLUSIVE, migration.where(statement),
                    statement.kind)))
    for blocker in report.blockers:
        log.info("preflight: %s", blocker.describe())
    for hidden in report.unknown:
        log.info("preflight cannot know the locks of %s", hidden.describe())
    return report
