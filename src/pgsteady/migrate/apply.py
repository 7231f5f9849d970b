"""Applying migrations so that a blocked one gives up fast and leaves nothing behind.

Each migration runs in its own transaction with ``SET LOCAL lock_timeout`` and
``statement_timeout``; its history row commits with it. When it cannot get a lock in time
(SQLSTATE 55P03, or a deadlock) the transaction is rolled back, the blocker is named in the
log, and it is tried again after a jittered wait with a longer lock_timeout (100 ms doubling
to a 5 s cap, as GitLab's ``with_lock_retries``), until its tries or its retry budget run out.
Readers queued behind it are therefore never stalled longer than the current lock_timeout.

One runner at a time: a session advisory lock, waited for a bounded time; the error names the
session holding it. ``no-transaction`` migrations (``CREATE INDEX CONCURRENTLY``) run alone,
with their own timeouts; an INVALID index a failed try left is dropped before the next try.

The history is the migrations' tool's own table (:mod:`~pgsteady.migrate.history`); before
anything runs, the folder and that history must agree (:mod:`~pgsteady.migrate.status`).
A transactional migration travels in one message (:mod:`~pgsteady.migrate.send`: BEGIN,
timeouts, statements, history row, COMMIT), and the next one is sent only once the server has
answered for it: a round trip per migration, where a psql session pays one per statement.
The server runs the whole of a message it has received, even after the client is gone, so a
runner killed mid-run (SIGKILL, a deploy step's timeout) leaves committed at most the
migration it was waiting on, with its history row; nothing after it runs, and ``--status``
says exactly what is applied. (Up to 32 migrations in one message saved ~5 % of a folder
of 300 tiny ones, and let a killed runner's last message commit up to 31 more migrations
after it was gone.) First tries of up to 32 migrations share one blocker-watch window; a
failed one is retried (or reported) alone.
"""

from __future__ import annotations

import logging
import math
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.errors import DeadlockDetected, LockNotAvailable, QueryCanceled

from pgsteady.errors import CannotConnect, MigrationBlocked, MigrationError, UsageError
from pgsteady.migrate import history, preflight, queries, send, source, status
from pgsteady.migrate.send import StatementFailed
from pgsteady.migrate.source import Migration
from pgsteady.migrate.watch import BlockerWatch, server_pid
from pgsteady.settings import (
    connect_timeout_kwargs,
    pg_interval,
    redact,
    refuse_admin_console,
    scrub,
)

if TYPE_CHECKING:  # the analysis (pglast's trees) is imported when a statement needs it
    from pgsteady.sql.analysis import StatementInfo

log = logging.getLogger("pgsteady.migrate")

T = TypeVar("T")
RETRYABLE = (LockNotAvailable, DeadlockDetected)
MIN_LOCK_TIMEOUT = 0.02  # a try with less time than this left is not worth starting
POLL_RUNNER_LOCK = 0.1
LOGGED_QUERY_CHARS = 80
# Transactional migrations whose first tries run back to back (a message each) in one
# blocker-watch window; a failed one is then retried alone.
BATCH_MIGRATIONS = 32  # ~10 ms of a quiet server: the blocker watch (50 ms) stays idle
BATCH_CHARS = 1 << 20


def application_name() -> str:
    """The session label every migration connection carries: ``pgsteady-migrate@host:pid``."""
    return f"pgsteady-migrate@{socket.gethostname()}:{os.getpid()}"[:63]


@dataclass(frozen=True)
class Policy:
    """How long a migration may wait, and how it retries. Durations are seconds.

    ``lock_timeout`` is the cap of the escalating schedule that starts at
    ``first_lock_timeout``; ``retry_budget`` bounds all tries and waits of one migration, and
    the clock never restarts on retry.
    """

    lock_timeout: float = 5.0
    first_lock_timeout: float = 0.1
    statement_timeout: float = 60.0
    index_statement_timeout: float = 3600.0  # no-transaction statements build whole indexes
    retries: int = 10
    retry_budget: float = 120.0
    first_wait: float = 0.1
    max_wait: float = 5.0
    runner_wait: float = 10.0
    blocker_age: float = 1.0  # preflight: ignore lock holders younger than this
    history_schema: str = "public"
    history_table: str = ""  # "": the tool's own (pgsteady_migrations, goose_db_version, ...)
    allow_out_of_order: bool = False

    def __post_init__(self) -> None:
        for name in ("lock_timeout", "first_lock_timeout", "statement_timeout",
                     "index_statement_timeout", "retry_budget", "first_wait", "max_wait",
                     "runner_wait", "blocker_age"):
            value = getattr(self, name)
            if not value >= 0:
                raise UsageError(f"{name} must be a non-negative number of seconds, "
                                 f"got {value!r}")
        if self.lock_timeout <= 0:
            raise UsageError("lock_timeout must be above 0: without it a blocked migration "
                             "stalls every query on its table; pass e.g. 5s")
        if self.retries < 0:
            raise UsageError(f"retries must be 0 or more, got {self.retries!r}")

    def lock_timeout_for(self, attempt: int) -> float:
        """The lock_timeout of try ``attempt`` (1-based): doubling from the first to the cap."""
        first = min(self.first_lock_timeout or self.lock_timeout, self.lock_timeout)
        return min(self.lock_timeout, math.ldexp(first, attempt - 1))

    def wait_before(self, attempt: int) -> float:
        """Jittered pause before try ``attempt`` (2+): half to all of a doubling step."""
        step = min(self.max_wait, math.ldexp(self.first_wait, max(0, attempt - 2)))
        return step * random.uniform(0.5, 1.0)


@dataclass(frozen=True)
class Attempt:
    number: int
    lock_timeout: float


@dataclass(frozen=True)
class Applied:
    """A migration that committed."""

    version: int
    name: str
    tries: int
    seconds: float
    tag: str = ""  # the version as the tool writes it (Flyway's 1.1, Diesel's 00000000000000)


def pg_error(exc: BaseException) -> BaseException | None:
    """The psycopg error behind ``exc`` (itself, SQLAlchemy's ``.orig``, or the cause)."""
    for candidate in (exc, getattr(exc, "orig", None), getattr(exc, "cause", None),
                      exc.__cause__):
        if isinstance(candidate, psycopg.Error):
            return candidate
    return None


def describe_pg_error(error: BaseException) -> str:
    """``SQLSTATE message; DETAIL: ...; HINT: ...`` in one line, secrets scrubbed."""
    sqlstate = getattr(error, "sqlstate", None) or "error"
    text = f"{sqlstate} {_first_line(error)}"
    diag = getattr(error, "diag", None)
    for label, value in (("DETAIL", getattr(diag, "message_detail", None)),
                         ("HINT", getattr(diag, "message_hint", None))):
        if value:
            text += f"; {label}: {scrub(' '.join(value.split()))}"
    return text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return scrub(text.splitlines()[0]) if text else type(exc).__name__


def with_lock_retries(
    try_once: Callable[[Attempt], T], policy: Policy, *, what: str,
    name_blockers: Callable[[BaseException], list[preflight.Blocker]] | None = None,
    failed_try: BaseException | None = None, started: float | None = None,
) -> tuple[T, int]:
    """Run ``try_once`` until it gets its locks, within ``policy``'s tries and budget.

    ``try_once`` must roll back everything it did when it raises. Only lock failures
    (55P03, 40P01) are retried; anything else propagates at once. Returns (result, tries).
    ``failed_try``: the first try was made elsewhere (several migrations in one message) and
    failed with it, begun at ``started``: it is logged and named here, the schedule goes on
    from the second try, and the budget counts from ``started``, so the clock never restarts.
    """
    start = time.monotonic() if started is None else started
    deadline = start + policy.retry_budget
    last: BaseException | None = None
    blockers: list[preflight.Blocker] = []
    tries = 0
    for number in range(1, policy.retries + 2):
        if number > 1:
            wait = min(policy.wait_before(number), deadline - time.monotonic() - MIN_LOCK_TIMEOUT)
            if wait < 0:
                break
            time.sleep(wait)
        remaining = deadline - time.monotonic()
        if number > 1 and remaining < MIN_LOCK_TIMEOUT:
            break
        lock_timeout = max(MIN_LOCK_TIMEOUT, min(policy.lock_timeout_for(number), remaining))
        tries = number
        if number == 1 and failed_try is not None:
            if not isinstance(pg_error(failed_try), RETRYABLE):
                raise failed_try
            last, lock_timeout = failed_try, first_lock_timeout(policy)
        else:
            try:
                return try_once(Attempt(number, lock_timeout)), number
            except Exception as exc:
                if not isinstance(pg_error(exc), RETRYABLE):
                    raise
                last = exc
        blockers = _safe_blockers(name_blockers, last)
        log.warning("%s: try %d could not get its locks within lock_timeout %.0f ms (%s); "
                    "blocked by: %s", what, number, lock_timeout * 1000,
                    type(pg_error(last)).__name__,
                    "; ".join(b.describe(query_chars=LOGGED_QUERY_CHARS) for b in blockers)
                    or "(gone before it was seen)")
    spent = time.monotonic() - start
    named = "; ".join(b.describe() for b in blockers) or \
        "a session not identified (it may have ended)"
    raise MigrationBlocked(
        f"{what}: could not get its locks in {tries} tries over {spent:.1f}s (retry budget "
        f"{policy.retry_budget:g}s, lock_timeout up to {policy.lock_timeout:g}s); nothing of it "
        f"was applied. Blocked by: {named}. Wait for it, or end it with "
        f"pg_terminate_backend(pid), then run again") from last


def first_lock_timeout(policy: Policy) -> float:
    """The lock_timeout of a first try (what :func:`with_lock_retries` gives try 1)."""
    return max(MIN_LOCK_TIMEOUT, min(policy.lock_timeout_for(1), policy.retry_budget))


def _safe_blockers(name_blockers: Callable[[BaseException], list[preflight.Blocker]] | None,
                   exc: BaseException) -> list[preflight.Blocker]:
    """Naming the blocker is best effort: it must never hide the lock failure itself."""
    if name_blockers is None:
        return []
    try:
        return name_blockers(exc)
    except Exception:
        log.debug("could not look up the blocking sessions", exc_info=True)
        return []


def connect(dsn: str, *, connect_timeout: int = 10) -> psycopg.Connection[Any]:
    """An autocommit connection labelled ``pgsteady-migrate@host:pid``; CannotConnect if not.

    ``connect_timeout`` is only a default: one in the DSN (key or URL query) or in
    ``PGCONNECT_TIMEOUT`` wins, as libpq users expect.
    """
    try:
        conn = psycopg.connect(dsn, autocommit=True, application_name=application_name(),
                               prepare_threshold=None,
                               **connect_timeout_kwargs(dsn, connect_timeout))
    except psycopg.OperationalError as exc:
        raise CannotConnect(f"cannot connect to {redact(dsn) or 'the default database'}: "
                            f"{_first_line(exc)}") from exc
    refuse_admin_console(conn)
    return conn


class EarlyConnection:
    """:func:`connect` begun in a thread while the caller loads and checks the folder.

    Opening a session is mostly waiting (the server starts a backend, authenticates and loads
    its caches: 5-8 ms on loopback, more across a network) and loading 300 files is mostly
    Python; doing both at once takes the wait off every run. :meth:`take` gives the
    connection or raises what connecting raised; :meth:`discard` closes it unused (the folder
    was refused). The wait is bounded by the connect timeout."""

    def __init__(self, dsn: str) -> None:
        self._conn: psycopg.Connection[Any] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._connect, args=(dsn,), daemon=True,
                                        name="pgsteady-connect")
        self._thread.start()

    def _connect(self, dsn: str) -> None:
        try:
            self._conn = connect(dsn)
        except BaseException as exc:  # handed to take()'s caller
            self._error = exc

    def take(self) -> psycopg.Connection[Any]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._conn is not None
        return self._conn

    def discard(self) -> None:
        self._thread.join()
        if self._conn is not None:
            self._conn.close()


def refuse_transaction_pooler(conn: psycopg.Connection[Any], dsn: str) -> None:
    """UsageError if ``conn`` goes through a pooler that shares server connections between
    clients (PgBouncer transaction or statement mode): migrate's session settings would leak
    to other clients and its runner lock would stay on a pooled server connection.

    Direct connections are recognised by the server's port being the one we dialled; through
    anything else, a second client connection that lands on our backend proves the sharing
    (an idle server connection is handed to the next client, last used first).
    """
    row = conn.execute(queries.BACKEND_AND_PORT).fetchone()
    if row is None:
        return
    pid, server_port = row
    dialled = conn.info.port
    if server_port is None or server_port == dialled:
        return
    with connect(dsn) as other:
        for _ in range(3):
            seen = other.execute(queries.BACKEND_AND_PORT).fetchone()
            again = conn.execute(queries.BACKEND_AND_PORT).fetchone()
            if (seen is not None and seen[0] == pid) or (again is not None and again[0] != pid):
                raise UsageError(
                    f"{redact(dsn) or 'the database'} is reached through a transaction pooler "
                    f"(server connections are shared between clients): migrate's settings "
                    f"and its runner lock would leak to other clients. Connect directly to "
                    f"PostgreSQL or through a session-mode pool")


@contextmanager
def runner_lock(conn: psycopg.Connection[Any], wait: float) -> Iterator[None]:
    """Hold the one-runner-at-a-time advisory lock; wait at most ``wait`` seconds for it."""
    deadline = time.monotonic() + wait
    params = {"key": queries.RUNNER_LOCK_KEY}
    while True:
        row = conn.execute(queries.TRY_RUNNER_LOCK, params).fetchone()
        if row is not None and row[0]:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            holder = _runner_lock_holder(conn)
            raise MigrationBlocked(
                f"another migration runner is active: {holder}; waited {wait:g}s for it. Let it "
                f"finish and run again (or raise the wait)")
        time.sleep(min(POLL_RUNNER_LOCK, left))
    try:
        yield
    finally:
        try:
            if not conn.closed:
                conn.execute(queries.RELEASE_RUNNER_LOCK, params)
        except psycopg.Error:  # a lost session has released it already; keep the real error
            log.debug("could not release the runner lock", exc_info=True)


def _runner_lock_holder(conn: psycopg.Connection[Any]) -> str:
    from psycopg.rows import dict_row  # noqa: PLC0415 - only on this path

    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(queries.RUNNER_LOCK_HOLDER, {
            "hi": queries.RUNNER_LOCK_HI, "lo": queries.RUNNER_LOCK_LO,
            "query_chars": preflight.QUERY_CHARS}).fetchone()
    if row is None:
        return "its holder ended meanwhile"
    return preflight._session(row).describe()


def _execute(conn: psycopg.Connection[Any], text: str) -> None:
    # Migration text is the user's own SQL, sent as is, without parameters.
    conn.execute(text)  # type: ignore[arg-type,unused-ignore]  # not a LiteralString, by design


def backstop(conn: psycopg.Connection[Any], policy: Policy) -> None:
    """Session-wide timeouts, so pgsteady's own catalog reads can never hang either."""
    _set(conn, "lock_timeout", policy.lock_timeout, local=False)
    _set(conn, "statement_timeout", policy.statement_timeout, local=False)


def _set(conn: psycopg.Connection[Any], name: str, seconds: float, *, local: bool) -> None:
    query = queries.SET_LOCAL if local else queries.SET_SESSION
    conn.execute(query, {"name": name, "value": pg_interval(seconds)})


def store_of(policy: Policy, migrations: Sequence[Migration]) -> history.Store:
    """The history table of the migrations' tool (pgsteady's by default)."""
    tools = {m.layout for m in migrations} or {"pgsteady"}
    if len(tools) > 1:
        raise UsageError(f"migrations from several layouts ({', '.join(sorted(tools))}); run "
                         f"one folder at a time")
    return history.Store(tools.pop(), policy.history_schema, policy.history_table or None)


def states(conn: psycopg.Connection[Any], migrations: Sequence[Migration],
           policy: Policy) -> list[status.Entry]:
    """Every version of the folder and the history with its state (``--status``)."""
    store = store_of(policy, migrations)
    return status.compare(migrations, store.applied(conn, migrations),
                          allow_out_of_order=policy.allow_out_of_order)


def pending(conn: psycopg.Connection[Any], migrations: Sequence[Migration],
            policy: Policy) -> list[Migration]:
    """Migrations not in the history yet, in order; MigrationError if the folder and the
    history disagree (an edited, renamed, missing, unfinished or out-of-order version)."""
    if not migrations:
        raise MigrationError("the folder holds no migrations; check --dir (and --layout)")
    entries = states(conn, migrations, policy)
    wrong = status.disagreements(entries)
    if wrong:
        raise MigrationError(status.refusal(wrong, store_of(policy, migrations).qualified))
    return status.pending(entries)


def baseline(conn: psycopg.Connection[Any], migrations: Sequence[Migration], tag: str,
             policy: Policy) -> list[Migration]:
    """Record every migration up to and including ``tag`` as applied, running none of them:
    adopting a database whose schema already has them."""
    store = store_of(policy, migrations)
    target = next((m for m in migrations if m.has_version(tag)), None)
    if target is None:
        raise UsageError(f"--baseline {tag}: no migration with that version in the folder; "
                         f"pass one of its versions")
    with conn.transaction():
        _set(conn, "lock_timeout", policy.lock_timeout, local=True)
        store.ensure(conn)
    applied = store.applied(conn, migrations)
    adopted = [m for m in migrations if m.order <= target.order and m.tag not in applied]
    with conn.transaction():
        for migration in adopted:
            store.record(conn, migration, 0, 0.0)
    for migration in adopted:
        log.warning("baseline: recorded %s as applied without running it", migration.label)
    return adopted


def plan(dsn: str, migrations: Sequence[Migration], policy: Policy | None = None) \
        -> list[Migration]:
    """The pending migrations, applying nothing (``--plan``)."""
    policy = policy or Policy()
    with connect(dsn) as conn:
        refuse_transaction_pooler(conn, dsn)  # its session settings would leak too
        backstop(conn, policy)
        return pending(conn, migrations, policy)


def run_preflight(dsn: str, migrations: Sequence[Migration], policy: Policy | None = None) \
        -> preflight.Report:
    """Preflight the pending migrations on a fresh connection (``pgsteady preflight``)."""
    policy = policy or Policy()
    with connect(dsn) as conn:
        refuse_transaction_pooler(conn, dsn)
        backstop(conn, policy)
        return preflight.check(conn, pending(conn, migrations, policy),
                               min_age=policy.blocker_age)


def migrate(dsn: str, migrations: Sequence[Migration], policy: Policy | None = None, *,
            check_first: bool = True,
            on_applied: Callable[[Applied], None] | None = None,
            baseline_tag: str | None = None,
            early: EarlyConnection | None = None) -> list[Applied]:
    """Apply every pending migration, each all-or-nothing; stop at the first that fails.

    ``early``: a connection to ``dsn`` begun while the migrations were loaded. Raises
    MigrationBlocked (preflight refused, runner busy, or retries exhausted), MigrationError
    (a statement failed), CannotConnect.
    """
    policy = policy or Policy()
    with early.take() if early is not None else connect(dsn) as conn:
        refuse_transaction_pooler(conn, dsn)  # before the runner lock: it must not leak
        return _migrate(conn, migrations, policy, check_first=check_first,
                        on_applied=on_applied, baseline_tag=baseline_tag,
                        watch_connect=lambda: _watch_connection(dsn))


def _migrate(conn: psycopg.Connection[Any], migrations: Sequence[Migration], policy: Policy,
             *, check_first: bool, on_applied: Callable[[Applied], None] | None,
             baseline_tag: str | None,
             watch_connect: Callable[[], psycopg.Connection[Any]] | None = None) \
        -> list[Applied]:
    done: list[Applied] = []
    with runner_lock(conn, policy.runner_wait):
        backstop(conn, policy)
        if baseline_tag is not None:
            baseline(conn, migrations, baseline_tag, policy)
        todo = pending(conn, migrations, policy)
        todo, elsewhere = _before_elsewhere(todo)
        if not todo:
            if elsewhere is not None:
                raise MigrationBlocked(_stopped_before(elsewhere))
            log.info("nothing to apply")
            return done
        if check_first:
            report = preflight.check(conn, todo, min_age=policy.blocker_age)
            if not report.ok:
                raise MigrationBlocked(report.summary())
        store = store_of(policy, migrations)
        with conn.transaction():
            _set(conn, "lock_timeout", policy.lock_timeout, local=True)
            store.ensure(conn)
        store.prepare(conn)
        watcher = BlockerWatch(watch_connect, server_pid(conn)) if watch_connect else None
        with watcher or nullcontext(), _unprepared_after(conn, store):
            position = 0
            while position < len(todo):  # each round applies one migration at least, or raises
                batch = next_batch(todo, position)
                applied: list[Applied] = []
                failure: BaseException | None = None
                started = time.monotonic()
                if len(batch) > 1:
                    applied, failure, started = apply_batch(conn, batch, policy, store,
                                                            watcher=watcher)
                for one in applied:
                    done.append(one)
                    if on_applied is not None:
                        on_applied(one)
                position += len(applied)
                if failure is None and len(batch) > 1:
                    continue
                # alone: a no-transaction migration, or the one that failed in a batch (or
                # one whose message the server refused to parse: none of it ran)
                refused = isinstance(failure, send.MessageRefused)
                one = apply_one(conn, todo[position], policy, store, watcher=watcher,
                                first_try=None if refused else failure,
                                started=None if refused else started)
                done.append(one)
                if on_applied is not None:
                    on_applied(one)
                position += 1
    if elsewhere is not None:
        raise MigrationBlocked(_stopped_before(elsewhere, len(done)))
    return done


def _before_elsewhere(todo: list[Migration]) -> tuple[list[Migration], Migration | None]:
    """The pending migrations before the first one pgsteady cannot run, and that one."""
    for index, migration in enumerate(todo):
        if migration.elsewhere is not None:
            return todo[:index], migration
    return todo, None


def _stopped_before(migration: Migration, applied: int = 0) -> str:
    done = f"applied {applied} migration(s), then stopped" if applied else "stopped"
    return (f"{done} before {migration.path.name}: {migration.elsewhere}; run it with its "
            f"tool (goose up-to {migration.tag}), then pgsteady migrate again")


@contextmanager
def _unprepared_after(conn: psycopg.Connection[Any], store: history.Store) -> Iterator[None]:
    try:
        yield
    finally:
        store.unprepare(conn)


def next_batch(todo: Sequence[Migration], position: int) -> Sequence[Migration]:
    """The transactional migrations from ``position`` on whose first tries go back to back
    (bounded in number and size, so the blocker watch rarely needs to look)."""
    end, chars = position, 0
    while end < len(todo) and end - position < BATCH_MIGRATIONS and todo[end].transactional:
        chars += len(todo[end].sql)
        if chars > BATCH_CHARS and end > position:
            break
        end += 1
    return todo[position:max(end, position + 1)]


def apply_batch(conn: psycopg.Connection[Any], batch: Sequence[Migration], policy: Policy,
                store: history.Store, *, watcher: BlockerWatch | None = None) \
        -> tuple[list[Applied], BaseException | None, float]:
    """First tries of several transactional migrations, a message each (its transaction with
    its timeouts and history row), the next sent once the server has answered for the one
    before, so a killed runner leaves at most one of them committed that it did not see
    commit: (applied, why the next one failed or None, when that one's try began). The
    caller retries or reports the failed one alone."""
    records = [store.record_sql(conn, m, 1, 0.0) for m in batch]
    reads_clock = store.reads_clock(conn)
    lock_timeout = first_lock_timeout(policy)
    applied: list[Applied] = []
    failure: BaseException | None = None
    began = time.monotonic()
    if watcher is not None:
        watcher.take()  # forget what earlier tries saw
    with watcher.watching() if watcher is not None else nullcontext():
        for migration, record in zip(batch, records, strict=True):
            if watcher is not None and applied:
                watcher.next_try()  # quick tries in a row are not one long wait
            began = time.monotonic()
            sent = send.send(conn, [migration], [record], lock_timeout=lock_timeout,
                             statement_timeout=policy.statement_timeout,
                             record_reads_clock=reads_clock)
            if sent.failure is not None:
                failure = sent.failure
                break
            took = sent.seconds[0] if sent.seconds else time.monotonic() - began
            log.info("applied %s in %.0f ms (1 tries)", migration.label, took * 1000)
            applied.append(Applied(migration.version, migration.name, 1, took, migration.tag))
    return applied, failure, began


def _watch_connection(dsn: str) -> psycopg.Connection[Any]:
    """The blocker watch's own session, labelled so an operator can tell it apart."""
    name = application_name().replace("pgsteady-migrate@", "pgsteady-migrate-watch@", 1)
    return psycopg.connect(dsn, autocommit=True, application_name=name, connect_timeout=5,
                           prepare_threshold=None)


def apply_one(conn: psycopg.Connection[Any], migration: Migration, policy: Policy,
              store: history.Store, *, watcher: BlockerWatch | None = None,
              first_try: BaseException | None = None, started: float | None = None) -> Applied:
    """One migration, with lock retries; all of it or nothing of it.

    With a ``watcher`` on ``conn``'s backend, a failed try names the sessions seen in its
    way; without one (or if it saw none), those the analysis predicts. ``first_try``: its
    first try, begun at ``started``, was made in a batch (:func:`apply_batch`) and failed."""
    if not migration.transactional and len(migration.parts) > 1:
        return _apply_in_steps(conn, migration, policy, store, watcher=watcher)
    start = time.monotonic() if started is None else started
    step = _transactional if migration.transactional else _autocommit

    def try_once(attempt: Attempt) -> None:
        if watcher is None:
            step(conn, migration, attempt, policy=policy, store=store, start=start)
            return
        watcher.take()  # forget what earlier tries saw
        with watcher.watching():
            step(conn, migration, attempt, policy=policy, store=store, start=start)

    def name_blockers(exc: BaseException) -> list[preflight.Blocker]:
        seen = watcher.take() if watcher is not None else []
        if seen:
            return seen
        statements = [exc.statement] if isinstance(exc, StatementFailed) else \
            list(migration.statements)
        needs = preflight.resolve(conn, migration, statements)
        found = preflight.blockers_for(conn, needs, min_age=0.0)
        if any(s.kind in preflight.SNAPSHOT_WAITERS for s in statements):
            # a concurrent build also waits for every old snapshot, whatever it locks
            named = {b.session.pid for b in found}
            found += [preflight.Blocker(session, "old snapshot", None, None, None)
                      for session in preflight.old_snapshots(conn, min_age=0.0)
                      if session.pid not in named]
        return found

    try:
        _, tries = with_lock_retries(try_once, policy, what=migration.label,
                                     name_blockers=name_blockers, failed_try=first_try,
                                     started=start)
    except StatementFailed as exc:
        raise _failure(migration, exc, policy, _invalid_index(conn, migration)) from exc.cause
    except MigrationBlocked as exc:
        left = _invalid_index(conn, migration)
        if left is None:
            raise
        raise MigrationBlocked(str(exc).replace("nothing of it was applied", left)) \
            from exc.__cause__
    seconds = time.monotonic() - start
    log.info("applied %s in %.0f ms (%d tries)", migration.label, seconds * 1000, tries)
    return Applied(migration.version, migration.name, tries, seconds, migration.tag)


class _Unrecorded(history.Store):
    """The history of a step that is not the last of its migration: nothing to write."""

    def start(self, conn: psycopg.Connection[Any], migration: Migration) -> None:
        pass

    def unstart(self, conn: psycopg.Connection[Any], migration: Migration) -> None:
        pass

    def record(self, conn: psycopg.Connection[Any], migration: Migration, tries: int,
               seconds: float) -> None:
        pass


def _apply_in_steps(conn: psycopg.Connection[Any], migration: Migration, policy: Policy,
                    store: history.Store, *, watcher: BlockerWatch | None) -> Applied:
    """A no-transaction file of several statements, run as its tool runs it (goose, Flyway,
    sql-migrate: statement by statement, each committing on its own): each statement is a
    step with its own lock retries (and invalid-index cleanup), the history row is written
    with the last. A failed step never reruns the ones before it; its error says they stay
    applied, as they would with the tool."""
    start = time.monotonic()
    tries = 0
    last = len(migration.parts) - 1
    unrecorded = _Unrecorded(store.tool, store.schema, store.table)
    for number, part in enumerate(migration.parts):
        step = replace(migration, parts=(part,))
        try:
            done = apply_one(conn, step, policy, store if number == last else unrecorded,
                             watcher=watcher)
        except MigrationError as exc:
            if number == 0:
                raise
            tool = source.tool_name(migration.layout)
            ran = "statement 1" if number == 1 else f"statements 1-{number}"
            raise type(exc)(f"{exc} ({ran} of {last + 1} in this file ran before it and stay "
                            f"applied, each on its own as {tool} runs them; a rerun runs "
                            f"them again, so they must be safe to repeat, like IF NOT "
                            f"EXISTS)") from exc.__cause__
        tries = max(tries, done.tries)  # the most any step needed
    return Applied(migration.version, migration.name, tries, time.monotonic() - start,
                   migration.tag)


def _invalid_index(conn: psycopg.Connection[Any], migration: Migration) -> str | None:
    """What a failed concurrent index build left, in words; None when it left nothing."""
    target = _index_target(conn, migration)
    if target is None or conn.closed:
        return None
    try:
        row = conn.execute(queries.INDEX_VALIDITY, target).fetchone()
    except psycopg.Error:
        return None
    if row is None or row[1]:
        return None
    return (f"it left the INVALID index {row[2]}.{row[3]}, which the next run drops before "
            f"building it again")


def _failure(migration: Migration, exc: StatementFailed, policy: Policy,
             invalid_index: str | None = None) -> MigrationError:
    cause = exc.cause
    if isinstance(cause, QueryCanceled):
        limit = policy.statement_timeout if migration.transactional else \
            policy.index_statement_timeout
        why = f"statement_timeout of {limit:g}s reached"
    else:
        why = describe_pg_error(cause)
    left = "nothing of it was applied" if migration.transactional else \
        invalid_index or "it ran outside a transaction and did not take effect"
    where = error_position(migration, exc.statement, cause, exc.sent_offset) or exc.where
    return MigrationError(f"{where}: {exc.statement.kind} failed: {why}; {left}. Fix the "
                          f"migration or the data and run again")


def error_position(migration: Migration, statement: StatementInfo, error: psycopg.Error,
                   sent_offset: int = 0) -> str | None:
    """PostgreSQL's error position (a character of the text sent, where the statement began
    at ``sent_offset``) as ``file:line:col``; None without one, or outside the statement."""
    position = getattr(error.diag, "statement_position", None)
    if not position or not str(position).isdigit():
        return None
    inner = int(position) - sent_offset
    if not 1 <= inner <= len(statement.sql) + 1:
        return None
    before = statement.sql[:inner - 1]
    lines = before.count("\n")
    col = statement.col + len(before) if not lines else len(before) - before.rfind("\n")
    return f"{migration.path}:{statement.line + lines}:{col}"


def _run_statements(conn: psycopg.Connection[Any], migration: Migration) -> None:
    for statement in migration.statements:
        try:
            _execute(conn, statement.sql)
        except psycopg.Error as exc:
            raise StatementFailed(migration.where(statement), statement, exc) from exc


def _transactional(conn: psycopg.Connection[Any], migration: Migration, attempt: Attempt, *,
                   policy: Policy, store: history.Store, start: float) -> None:
    """The whole migration in one round trip: BEGIN, its timeouts, its statements, its history
    row, COMMIT (a psql session needs a round trip per statement)."""
    record = store.record_sql(conn, migration, attempt.number, time.monotonic() - start)
    sent = send.send(conn, [migration], [record], lock_timeout=attempt.lock_timeout,
                     statement_timeout=policy.statement_timeout,
                     record_reads_clock=store.reads_clock(conn))
    if isinstance(sent.failure, send.MessageRefused):
        _statement_by_statement(conn, migration, attempt, policy=policy, store=store,
                                start=start)
    elif sent.failure is not None:
        raise sent.failure


def _statement_by_statement(conn: psycopg.Connection[Any], migration: Migration,
                            attempt: Attempt, *, policy: Policy, store: history.Store,
                            start: float) -> None:
    """The migration in its transaction one statement at a time, as psql sends it: for one
    whose message the server's parser refused, so the error names the statement the server
    cannot read (a later one, or a string left open, could be where the parser stopped)."""
    with conn.transaction():
        _set(conn, "lock_timeout", attempt.lock_timeout, local=True)
        _set(conn, "statement_timeout", policy.statement_timeout, local=True)
        _run_statements(conn, migration)
        store.record(conn, migration, attempt.number, time.monotonic() - start)


def _autocommit(conn: psycopg.Connection[Any], migration: Migration, attempt: Attempt, *,
                policy: Policy, store: history.Store, start: float) -> None:
    """Outside a transaction: marked started first, so a process killed mid-way leaves an
    "unfinished" row the next run names, rather than a change nobody recorded."""
    _set(conn, "lock_timeout", attempt.lock_timeout, local=False)
    _set(conn, "statement_timeout", policy.index_statement_timeout, local=False)
    try:
        store.start(conn, migration)
        try:
            if not _drop_invalid_index(conn, migration):
                _run_statements(conn, migration)
        except StatementFailed:
            store.unstart(conn, migration)  # it failed cleanly: it did not take effect
            raise
        _set(conn, "statement_timeout", policy.statement_timeout, local=False)
        with conn.transaction():
            store.record(conn, migration, attempt.number, time.monotonic() - start)
    finally:
        try:
            if not conn.closed:
                backstop(conn, policy)
        except psycopg.Error:
            log.debug("could not restore the session timeouts", exc_info=True)


def _index_target(conn: psycopg.Connection[Any], migration: Migration) \
        -> dict[str, str] | None:
    """INDEX_VALIDITY's parameters for a concurrent index build, None for anything else."""
    statement = migration.statements[0]
    if migration.transactional or statement.kind != "CREATE INDEX CONCURRENTLY":
        return None
    node = statement.node
    parts = (node.relation.schemaname, node.relation.relname) if node.relation.schemaname \
        else (node.relation.relname,)
    return {"table": sql.Identifier(*parts).as_string(conn), "index": node.idxname}


def _drop_invalid_index(conn: psycopg.Connection[Any], migration: Migration) -> bool:
    """An earlier failed CREATE INDEX CONCURRENTLY leaves an INVALID index: drop it first.

    Returns True if a VALID index of that name is already on the table — an earlier build
    succeeded but its history row was lost (say, the connection died in between): the
    build is not repeated, only recorded."""
    statement = migration.statements[0]
    target = _index_target(conn, migration)
    if target is None:
        return False
    row = conn.execute(queries.INDEX_VALIDITY, target).fetchone()
    if row is None:
        return False
    _oid, valid, schema, index = row
    if valid:
        log.warning("%s: index %s.%s already exists and is valid (an earlier build finished); "
                    "recording the migration without building it again",
                    migration.label, schema, index)
        return True
    log.warning("%s: dropping invalid index %s.%s left by a failed earlier build",
                migration.label, schema, index)
    try:
        conn.execute(queries.drop_index_concurrently(schema, index))
    except psycopg.Error as exc:
        raise StatementFailed(migration.where(statement), statement, exc) from exc
    return False


def statements_of(text: str | None) -> list[StatementInfo]:
    """Best-effort analysis of SQL an ORM sent (the Alembic path); [] if it does not parse."""
    from pgsteady.sql.analysis import analyze  # noqa: PLC0415 - only when needed

    if not text:
        return []
    try:
        return analyze(text)
    except ValueError:
        return []
