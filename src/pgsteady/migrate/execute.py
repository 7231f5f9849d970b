"""Executing one migration's statements: in its transaction (one message, :mod:`.send`), outside
one (``CREATE INDEX CONCURRENTLY``, dropping an INVALID index a failed try left), or step by
step (a no-transaction file of several statements); and naming a failure's statement, file and
position.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.errors import QueryCanceled

from pgsteady.errors import MigrationBlocked, MigrationError
from pgsteady.migrate import history, preflight, queries, send, source
from pgsteady.migrate.policy import Applied, Attempt, Policy, describe_pg_error, with_lock_retries
from pgsteady.migrate.send import StatementFailed
from pgsteady.migrate.session import backstop, execute_text, set_setting
from pgsteady.migrate.source import Migration
from pgsteady.migrate.watch import BlockerWatch

if TYPE_CHECKING:  # the analysis (pglast's trees) is imported when a statement needs it
    from pgsteady.sql.analysis import StatementInfo

log = logging.getLogger("pgsteady.migrate")


def apply_one(conn: psycopg.Connection[Any], migration: Migration, policy: Policy,
              store: history.Store, *, watcher: BlockerWatch | None = None,
              first_try: BaseException | None = None, started: float | None = None) -> Applied:
    """One migration, with lock retries; all of it or nothing of it.

    With a ``watcher`` on ``conn``'s backend, a failed try names the sessions seen in its
    way; without one (or if it saw none), those the analysis predicts. ``first_try``: its
    first try, begun at ``started``, was made in a batch (:func:`apply_batch`) and failed."""
    if not migration.transactional and len(migration.parts) > 1:
        return apply_in_steps(conn, migration, policy, store, watcher=watcher)
    start = time.monotonic() if started is None else started
    step = run_in_transaction if migration.transactional else run_autocommit

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
        raise failure(migration, exc, policy, invalid_index(conn, migration)) from exc.cause
    except MigrationBlocked as exc:
        left = invalid_index(conn, migration)
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


def apply_in_steps(conn: psycopg.Connection[Any], migration: Migration, policy: Policy,
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
            tool = source.tool_name(migration.tool)
            ran = "statement 1" if number == 1 else f"statements 1-{number}"
            raise type(exc)(f"{exc} ({ran} of {last + 1} in this file ran before it and stay "
                            f"applied, each on its own as {tool} runs them; the history "
                            f"records the file only once all of it ran, so --status shows "
                            f"it pending, and a rerun runs the whole file again: its "
                            f"statements must be safe to repeat, like IF NOT EXISTS)") \
                from exc.__cause__
        tries = max(tries, done.tries)  # the most any step needed
    return Applied(migration.version, migration.name, tries, time.monotonic() - start,
                   migration.tag)


def invalid_index(conn: psycopg.Connection[Any], migration: Migration) -> str | None:
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


def failure(migration: Migration, exc: StatementFailed, policy: Policy,
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
            execute_text(conn, statement.sql)
        except psycopg.Error as exc:
            raise StatementFailed(migration.where(statement), statement, exc) from exc


def run_in_transaction(conn: psycopg.Connection[Any], migration: Migration, attempt: Attempt, *,
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
        set_setting(conn, "lock_timeout", attempt.lock_timeout, local=True)
        set_setting(conn, "statement_timeout", policy.statement_timeout, local=True)
        _run_statements(conn, migration)
        store.record(conn, migration, attempt.number, time.monotonic() - start)


def run_autocommit(conn: psycopg.Connection[Any], migration: Migration, attempt: Attempt, *,
                policy: Policy, store: history.Store, start: float) -> None:
    """Outside a transaction: marked started first, so a process killed mid-way leaves an
    "unfinished" row the next run names, rather than a change nobody recorded."""
    set_setting(conn, "lock_timeout", attempt.lock_timeout, local=False)
    set_setting(conn, "statement_timeout", policy.index_statement_timeout, local=False)
    try:
        store.start(conn, migration)
        try:
            if not _drop_invalid_index(conn, migration,
                                       recorded=not isinstance(store, _Unrecorded)):
                _run_statements(conn, migration)
        except StatementFailed:
            store.unstart(conn, migration)  # it failed cleanly: it did not take effect
            raise
        set_setting(conn, "statement_timeout", policy.statement_timeout, local=False)
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


def _drop_invalid_index(conn: psycopg.Connection[Any], migration: Migration, *,
                        recorded: bool = True) -> bool:
    """An earlier failed CREATE INDEX CONCURRENTLY leaves an INVALID index: drop it first.

    Returns True if a VALID index of that name is already on the table — an earlier build
    succeeded but its history row was lost (say, the connection died in between): the
    build is not repeated, only recorded. ``recorded=False``: the build is a step of a file
    of several statements (:func:`apply_in_steps`) that is not its last, so nothing is
    recorded now: the file's next statements run."""
    statement = migration.statements[0]
    target = _index_target(conn, migration)
    if target is None:
        return False
    row = conn.execute(queries.INDEX_VALIDITY, target).fetchone()
    if row is None:
        return False
    _oid, valid, schema, index = row
    if valid:
        then = "recording the migration" if recorded else \
            "going on with the file's next statement"
        log.warning("%s: index %s.%s already exists and is valid (an earlier build finished); "
                    "not building it again, %s", migration.label, schema, index, then)
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
