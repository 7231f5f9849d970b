"""Applying migrations so that a blocked one gives up fast and leaves nothing behind.

Each migration runs in its own transaction with ``SET LOCAL lock_timeout`` and
``statement_timeout``; its history row commits with it. When it cannot get a lock in time
(SQLSTATE 55P03, or a deadlock) the transaction is rolled back, the blocker is named in the
log, and it is tried again after a jittered wait with a longer lock_timeout (100 ms doubling
to a 5 s cap, as GitLab's ``with_lock_retries``), until its tries or its retry budget run out.
Readers queued behind it are therefore never stalled longer than the current lock_timeout.

One runner at a time: a session advisory lock, then the advisory locks the migrations' own
tool takes (Prisma's, golang-migrate's, Flyway's, tern's, goose's), so that tool and pgsteady
never migrate one database at once; waited for a bounded time, the error names the session
holding it. ``no-transaction`` migrations (``CREATE INDEX CONCURRENTLY``) run alone,
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
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import psycopg

from pgsteady.errors import MigrationBlocked, MigrationError, ServerWentAway, UsageError
from pgsteady.migrate import history, preflight, send, status
from pgsteady.migrate.execute import apply_one, statements_of
from pgsteady.migrate.policy import (
    RETRYABLE,
    Applied,
    Attempt,
    Policy,
    describe_pg_error,
    first_lock_timeout,
    pg_error,
    with_lock_retries,
)
from pgsteady.migrate.session import (
    EarlyConnection,
    application_name,
    backstop,
    connect,
    refuse_transaction_pooler,
    runner_lock,
    set_setting,
    tool_locks,
)
from pgsteady.migrate.source import Migration
from pgsteady.migrate.watch import BlockerWatch, server_pid
from pgsteady.tools.registry import Row

# The run lives here; its parts in policy (timeouts, retries), session (connection, runner
# lock) and execute (one migration's statements). Their names used from here stay importable.
__all__ = [
    "BATCH_CHARS",
    "BATCH_MIGRATIONS",
    "RETRYABLE",
    "Applied",
    "Attempt",
    "EarlyConnection",
    "Policy",
    "application_name",
    "apply_batch",
    "apply_one",
    "backstop",
    "baseline",
    "connect",
    "describe_pg_error",
    "migrate",
    "next_batch",
    "pending",
    "pg_error",
    "plan",
    "refuse_transaction_pooler",
    "run_preflight",
    "runner_lock",
    "statements_of",
    "states",
    "store_of",
    "tool_locks",
    "with_lock_retries",
]

log = logging.getLogger("pgsteady.migrate")

# Transactional migrations whose first tries run back to back (a message each) in one
# blocker-watch window; a failed one is then retried alone.
BATCH_MIGRATIONS = 32  # ~10 ms of a quiet server: the blocker watch (50 ms) stays idle
BATCH_CHARS = 1 << 20
# Seconds a new session gets to read the history after the server ended ours (libpq's least
# connect_timeout is 2 s).
RECONNECT_TIMEOUT = 2


def store_of(policy: Policy, migrations: Sequence[Migration]) -> history.Store:
    """The history table of the migrations' tool (pgsteady's by default)."""
    tools = {m.tool for m in migrations} or {"pgsteady"}
    if len(tools) > 1:
        raise UsageError(f"migrations from several layouts ({', '.join(sorted(tools))}); run "
                         f"one folder at a time")
    return history.Store(tools.pop(), policy.history_schema, policy.history_table or None)


def states(conn: psycopg.Connection[Any], migrations: Sequence[Migration],
           policy: Policy) -> list[status.Entry]:
    """Every version of the folder and the history with its state (``--status``)."""
    store = store_of(policy, migrations)
    store.refuse_foreign(conn)
    return status.compare(migrations, store.applied(conn, migrations),
                          allow_out_of_order=policy.allow_out_of_order)


def pending(conn: psycopg.Connection[Any], migrations: Sequence[Migration],
            policy: Policy) -> list[Migration]:
    """Migrations not in the history yet, in order; MigrationError if the folder and the
    history disagree (an edited, renamed, missing, unfinished or out-of-order version)."""
    if not migrations:
        raise MigrationError("the folder holds no migrations; check --dir (and --tool)")
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
        set_setting(conn, "lock_timeout", policy.lock_timeout, local=True)
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
                        watch_connect=lambda: _watch_connection(dsn),
                        reconnect=lambda: connect(dsn, connect_timeout=RECONNECT_TIMEOUT))


def _migrate(conn: psycopg.Connection[Any], migrations: Sequence[Migration], policy: Policy,
             *, check_first: bool, on_applied: Callable[[Applied], None] | None,
             baseline_tag: str | None,
             watch_connect: Callable[[], psycopg.Connection[Any]] | None = None,
             reconnect: Callable[[], psycopg.Connection[Any]] | None = None) \
        -> list[Applied]:
    done: list[Applied] = []
    store = store_of(policy, migrations)
    with runner_lock(conn, policy.runner_wait,
                     tool_locks(conn, store.tool, store.schema, store.table)):
        backstop(conn, policy)
        if baseline_tag is not None:
            store.refuse_foreign(conn)  # before the baseline writes a row
            baseline(conn, migrations, baseline_tag, policy)
        todo = pending(conn, migrations, policy)
        todo, elsewhere = _before_elsewhere(todo)
        if not todo:
            if elsewhere is not None:
                raise MigrationBlocked(_stopped_before(elsewhere))
            log.info("nothing to apply")
            return done
        if check_first:
            report = preflight.check(conn, todo, min_age=policy.blocker_age, unknown=False)
            if not report.ok:
                raise MigrationBlocked(report.summary())
        with conn.transaction():
            set_setting(conn, "lock_timeout", policy.lock_timeout, local=True)
            created = store.ensure(conn)
        fresh = store.raw(conn) if created else None
        store.prepare(conn)
        watcher = BlockerWatch(watch_connect, server_pid(conn)) if watch_connect else None
        with watcher or nullcontext(), _unprepared_after(conn, store):
            position = 0
            try:
                # each round applies one migration at least, or raises
                while position < len(todo):
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
            except Exception as exc:
                lost = session_lost(exc, conn)
                if lost is None:
                    if fresh is not None and not done:  # leave the database as it was found
                        store.drop_if_unchanged(conn, fresh)
                    raise
                raise went_away(lost, todo[position], migrations, store, reconnect) from exc
    if elsewhere is not None:
        raise MigrationBlocked(_stopped_before(elsewhere, len(done)))
    return done


def session_lost(exc: BaseException, conn: psycopg.Connection[Any]) -> psycopg.Error | None:
    """The driver's error behind ``exc`` when the session itself is gone (the server shut
    down, crashed or ended it: SQLSTATE 57P01-57P04, or the connection lost), else None.
    Such a failure is no fault of the migration's and must not read as one."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        one = todo.pop()
        if one is None or id(one) in seen:
            continue
        seen.add(id(one))
        if isinstance(one, psycopg.Error) and (
                (one.sqlstate or "").startswith("57P")
                or (isinstance(one, psycopg.OperationalError) and conn.broken)):
            return one
        cause = getattr(one, "cause", None)
        todo += [one.__cause__, one.__context__,
                 cause if isinstance(cause, BaseException) else None]
    return None


def went_away(error: psycopg.Error, running: Migration, migrations: Sequence[Migration],
              store: history.Store,
              reconnect: Callable[[], psycopg.Connection[Any]] | None) -> ServerWentAway:
    """What a lost session means for the migration that was running: whether it applied,
    read from the history on a new session (the server ended only ours), or unknown (the
    server is not back)."""
    why = describe_pg_error(error) if error.sqlstate else "the connection was lost"
    name = running.path.name
    outcome = None
    if reconnect is not None:
        try:
            with reconnect() as conn:
                set_setting(conn, "statement_timeout", RECONNECT_TIMEOUT, local=False)
                set_setting(conn, "lock_timeout", RECONNECT_TIMEOUT, local=False)
                outcome = _outcome(running, store.applied(conn, migrations), store)
        except Exception:  # the server is not back: the outcome cannot be read now
            log.debug("could not read the history after losing the session", exc_info=True)
    if outcome is None:
        return ServerWentAway(
            f"the server went away while {name} ran ({why}); whether {name} applied is "
            f"unknown: check pgsteady migrate --status once the server is back, then run "
            f"again")
    return ServerWentAway(f"the server ended the session while {name} ran ({why}); {outcome}; "
                          f"run again when the server is ready")


def _outcome(running: Migration, applied: dict[str, Row],
             store: history.Store) -> str:
    """Whether ``running`` applied, as its history row tells."""
    name = running.path.name
    row = applied.get(running.tag)
    if row is not None and row.finished:
        return f"{name} applied (its row in {store.qualified} is there)"
    if row is not None:
        return (f"{name} started outside a transaction and did not finish: part of it may have "
                f"taken effect; see pgsteady migrate --status")
    if running.transactional:
        return f"{name} did not apply ({store.qualified} does not have it)"
    return (f"{name} is not recorded in {store.qualified}, but it ran outside a transaction: "
            f"part of it may have taken effect; see pgsteady migrate --status")


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
