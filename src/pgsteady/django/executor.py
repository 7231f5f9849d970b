"""Django's MigrationExecutor, applying each migration as ``pgsteady migrate`` applies a file.

An atomic migration runs in one transaction with ``SET LOCAL lock_timeout`` (100 ms on the
first try, doubling to the alias's ``lock_timeout``) and ``statement_timeout``; its deferred
SQL (foreign keys, indexes Django adds at the end) and its ``django_migrations`` row commit
with it, so it is applied whole or not at all (Django itself records the row after the
commit when there is deferred SQL). A try that cannot get its locks (55P03, or a deadlock)
is rolled back whole and tried again after a jittered wait, within the retry budget, naming
the sessions seen in its way; when the budget is spent, :class:`MigrationBlocked` says who.

A migration with ``atomic = False`` (``AddIndexConcurrently``, ``RunSQL`` that cannot run in
a transaction) runs statement by statement, each committing on its own, as Django runs it:
each statement gets its own lock retries (one budget for the migration), the session's
statement_timeout is the policy's index one while it runs, and an INVALID index a failed
``CREATE INDEX CONCURRENTLY`` left is dropped before the build is tried again. A failure
after some statements committed says so: Django has no way to undo them.

One runner at a time: the ``pgsteady migrate`` advisory lock, held on a side session that
also names blockers; the plan is computed again once it is held.

A session the server ends (shutdown, crash, ``pg_terminate_backend``) is no fault of the
migration: :class:`ServerWentAway` (exit 3) says whether it applied, read from
``django_migrations`` on a new session, or that this is unknown while the server is down.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db.migrations.executor import MigrationExecutor
from psycopg import sql as pgsql

from pgsteady.django import _pgsteady as core

log = logging.getLogger("pgsteady.django")

_INDEX_VALIDITY_KIND = "CREATE INDEX CONCURRENTLY"


def label(migration: Any) -> str:
    return f"{migration.app_label}.{migration.name}"


def _watch_name() -> str:
    return f"pgsteady-migrate-watch@{socket.gethostname()}:{os.getpid()}"[:63]


class SteadyExecutor(MigrationExecutor):  # type: ignore[misc]  # Django is untyped
    """Applies each forward migration all or nothing, with lock retries (see the module)."""

    def __init__(self, connection: Any, progress_callback: Callable[..., Any] | None = None) \
            -> None:
        super().__init__(connection, progress_callback)
        options = getattr(connection, "pgsteady", None)
        self.policy: core.Policy = options.policy if options is not None else core.Policy()
        self.steady = options is not None  # another ENGINE: Django's own behaviour
        self._side: psycopg.Connection[Any] | None = None
        self._watcher: core.BlockerWatch | None = None
        self._last_sql = ""
        self._committed = 0  # statements of the running atomic = False migration committed

    # -- the run ------------------------------------------------------------------------------

    def migrate(self, targets: Any, plan: Any = None, state: Any = None, fake: bool = False,
                fake_initial: bool = False) -> Any:
        if not self.steady:
            return super().migrate(targets, plan, state, fake, fake_initial)
        if self.connection.pgsteady.pooler == "transaction":
            raise core.UsageError(
                f"DATABASES[{self.connection.alias!r}] goes through a transaction pooler: "
                f"migrate's settings and its runner lock would leak to other clients. Point "
                f"an alias at PostgreSQL directly (or a session-mode pool) and run "
                f"manage.py migrate --database <it>")
        with self._runner_session():
            if plan is not None:  # another runner may have applied some while we waited
                self.loader.build_graph()
                plan = self.migration_plan(targets)
            return super().migrate(targets, plan, state, fake, fake_initial)

    def _connect_side(self, name: str) -> psycopg.Connection[Any]:
        params = self.connection.get_connection_params()
        for key in ("context", "cursor_factory", "options"):
            params.pop(key, None)
        params.update(autocommit=True, application_name=name, prepare_threshold=None)
        params.setdefault("connect_timeout", 10)
        return psycopg.connect(**params)

    @contextmanager
    def _runner_session(self) -> Iterator[None]:
        self.connection.ensure_connection()
        with self.connection.cursor() as cursor:
            cursor.execute(core.queries.BACKEND_PID)
            pid = int(cursor.fetchone()[0])
        side = self._connect_side(_watch_name())
        try:
            core.backstop(side, self.policy)
            with core.runner_lock(side, self.policy.runner_wait):
                self._side = side
                self._watcher = core.BlockerWatch(lambda: self._connect_side(_watch_name()), pid)
                with self._watcher, self.connection.execute_wrapper(self._remember):
                    yield
        finally:
            self._side = self._watcher = None
            side.close()

    def _remember(self, execute: Callable[..., Any], sql: str, params: Any, many: bool,
                  context: dict[str, Any]) -> Any:
        """Keep the statement being sent: the blocker lookup predicts from it."""
        self._last_sql = sql
        return execute(sql, params, many, context)

    # -- one migration ------------------------------------------------------------------------

    def apply_migration(self, state: Any, migration: Any, fake: bool = False,
                        fake_initial: bool = False) -> Any:
        if not self.steady or fake or self._side is None:
            return super().apply_migration(state, migration, fake, fake_initial)
        if fake_initial:
            applied, soft_state = self.detect_soft_applied(state, migration)
            if applied:
                return super().apply_migration(soft_state, migration, fake=True)
        if self.progress_callback:
            self.progress_callback("apply_start", migration, False)
        start = time.monotonic()
        self._committed = 0
        try:
            if migration.atomic:
                state, tries = self._atomic(state, migration, start)
            else:
                state, tries = self._non_atomic(state, migration, start)
        except Exception as exc:
            lost = self._lost(exc)
            if lost is None:
                raise
            raise self._went_away(migration, lost) from exc
        log.info("applied %s in %.0f ms (%d %s)", label(migration),
                 (time.monotonic() - start) * 1000, tries, "try" if tries == 1 else "tries")
        if self.progress_callback:
            self.progress_callback("apply_success", migration, False)
        return state

    def _lost(self, exc: BaseException) -> psycopg.Error | None:
        """The driver's error behind ``exc`` when the session is gone: ended or lost (see
        ``pgsteady migrate``), or, Django having dropped it, a new one could not be opened
        (an error from the client with no SQLSTATE, or class 08)."""
        raw = self.connection.connection
        if raw is not None and (lost := core.session_lost(exc, raw)) is not None:
            return lost
        seen: set[int] = set()
        one: BaseException | None = exc
        while one is not None and id(one) not in seen:
            seen.add(id(one))
            if isinstance(one, psycopg.OperationalError) and \
                    (one.sqlstate is None or one.sqlstate.startswith(("08", "57P"))):
                return one
            one = one.__cause__ or one.__context__
        return None

    def _went_away(self, migration: Any, error: psycopg.Error) -> core.ServerWentAway:
        """The session is gone: whether ``migration`` applied, from django_migrations read on
        a new session, or unknown while the server is down (see ``pgsteady migrate``)."""
        why = core.describe_pg_error(error) if error.sqlstate else "the connection was lost"
        name = label(migration)
        table = self.recorder.Migration._meta.db_table
        try:
            with self._connect_side(_watch_name()) as conn:
                core.backstop(conn, self.policy)
                row = conn.execute(pgsql.SQL("SELECT 1 FROM {} WHERE app = %s AND name = %s")
                                   .format(pgsql.Identifier(table)),
                                   [migration.app_label, migration.name]).fetchone()
        except Exception:  # the server is not back: the outcome cannot be read now
            log.debug("could not read %s after losing the session", table, exc_info=True)
            return core.ServerWentAway(
                f"the server went away while {name} ran ({why}); whether it applied is "
                f"unknown: see manage.py showmigrations {migration.app_label} once the server "
                f"is back, then run migrate again")
        if row is not None:
            outcome = f"{name} applied (its row in {table} is there)"
        elif migration.atomic:
            outcome = f"{name} did not apply ({table} does not have it)"
        else:
            done = f"{self._committed} of its statements committed and stay applied; " \
                if self._committed else ""
            outcome = (f"{name} is not recorded in {table}, but it runs outside a transaction "
                       f"(atomic = False): {done}the statement running may have taken effect")
        return core.ServerWentAway(f"the server ended the session while {name} ran ({why}); "
                                   f"{outcome}; run migrate again when the server is ready")

    def _set(self, name: str, seconds: float | None, *, local: bool) -> None:
        """On the driver's connection: not a statement of the migration (no retries of its own,
        not counted), in the transaction Django has open, if any."""
        query = core.queries.SET_LOCAL if local else core.queries.SET_SESSION
        self.connection.connection.execute(query, {"name": name,
                                                   "value": core.pg_interval(seconds)})

    def _atomic(self, state: Any, migration: Any, start: float) -> tuple[Any, int]:
        def try_once(attempt: core.Attempt) -> Any:
            assert self._watcher is not None
            self._watcher.take()  # forget what earlier tries saw
            fresh = state.clone()  # a try that fails has moved its state forward already
            with self._watcher.watching(), \
                    self.connection.schema_editor(atomic=True) as editor:
                self._set("lock_timeout", attempt.lock_timeout, local=True)
                self._set("statement_timeout", self.policy.statement_timeout, local=True)
                after = migration.apply(fresh, editor)
                # Django runs deferred SQL on exit and records after the commit; here both
                # go in the transaction, with the migration: all of it, or nothing.
                for sql in editor.deferred_sql:
                    editor.execute(sql)
                editor.deferred_sql = []
                self.record_migration(migration)
            return after

        try:
            return core.with_lock_retries(try_once, self.policy, what=label(migration),
                                          name_blockers=self._name_blockers, started=start)
        except core.PgsteadyError:
            raise
        except Exception as exc:
            error = core.pg_error(exc)
            if error is None:
                raise
            raise core.MigrationError(
                f"{label(migration)} failed: {core.describe_pg_error(error)}; nothing of it "
                f"was applied. Fix the migration and run again") from exc

    def _non_atomic(self, state: Any, migration: Any, start: float) -> tuple[Any, int]:
        committed = 0
        tries = 1

        def each_statement(execute: Callable[..., Any], sql: str, params: Any, many: bool,
                           context: dict[str, Any]) -> Any:
            nonlocal committed, tries
            if self.connection.in_atomic_block:  # an atomic operation: its own transaction
                return execute(sql, params, many, context)
            number = committed + 1

            def try_once(attempt: core.Attempt) -> Any:
                assert self._watcher is not None
                self._watcher.take()
                self._set("lock_timeout", attempt.lock_timeout, local=False)
                with self._watcher.watching():
                    if self._drop_invalid_index(migration, sql):
                        return None
                    return execute(sql, params, many, context)

            result, used = core.with_lock_retries(
                try_once, self.policy, what=f"{label(migration)} (statement {number})",
                name_blockers=self._name_blockers, started=start)
            committed += 1
            self._committed = committed
            tries = max(tries, used)
            return result

        self._set("statement_timeout", self.policy.index_statement_timeout, local=False)
        try:
            with self.connection.execute_wrapper(each_statement), \
                    self.connection.schema_editor(atomic=False) as editor:
                state = migration.apply(state, editor)
            self.record_migration(migration)
        except Exception as exc:
            raise self._non_atomic_failure(migration, exc, committed) from exc
        finally:
            self._restore_session()
        return state, tries

    def _non_atomic_failure(self, migration: Any, exc: Exception, committed: int) \
            -> Exception:
        ran = (f" ({'statement 1' if committed == 1 else f'statements 1-{committed}'} of "
               f"this atomic = False migration committed before it and stay applied, "
               f"django_migrations not updated: a rerun runs them again, so they must be "
               f"safe to repeat, like IF NOT EXISTS)") if committed else ""
        if isinstance(exc, core.PgsteadyError):
            return type(exc)(f"{exc}{ran}")
        error = core.pg_error(exc)
        if error is None:
            return exc
        left = "" if committed else "; nothing of it was applied"
        return core.MigrationError(f"{label(migration)} failed: "
                                   f"{core.describe_pg_error(error)}{left}{ran}. Fix the "
                                   f"migration and run again")

    def _restore_session(self) -> None:
        """The alias's own timeouts again, after a non-atomic migration changed them."""
        try:
            if self.connection.pgsteady.pooler == "direct":
                self.connection.connection.execute("RESET lock_timeout")
                self.connection.connection.execute("RESET statement_timeout")
            else:
                session = self.connection.pgsteady.session
                self._set("lock_timeout", session.lock_timeout, local=False)
                self._set("statement_timeout", session.statement_timeout, local=False)
        except Exception:
            log.debug("could not restore the session timeouts", exc_info=True)

    def _drop_invalid_index(self, migration: Any, sql: str) -> bool:
        """Before ``CREATE INDEX CONCURRENTLY``: drop the INVALID index an earlier failed build
        left; True (skip the build) when a VALID one of that name is there already."""
        if "concurrently" not in sql.lower() or self._side is None:
            return False
        found = [s for s in core.statements_of(sql) if s.kind == _INDEX_VALIDITY_KIND]
        if not found or found[0].node is None:
            return False
        node = found[0].node
        relation = node.relation
        parts = (relation.schemaname, relation.relname) if relation.schemaname \
            else (relation.relname,)
        table = pgsql.Identifier(*parts).as_string(self._side)
        row = self._side.execute(core.queries.INDEX_VALIDITY,
                                 {"table": table, "index": node.idxname}).fetchone()
        if row is None:
            return False
        _oid, valid, schema, index = row
        if valid:
            log.warning("%s: index %s.%s already exists and is valid (an earlier build "
                        "finished); not building it again", label(migration), schema, index)
            return True
        log.warning("%s: dropping invalid index %s.%s left by a failed earlier build",
                    label(migration), schema, index)
        self._side.execute(core.queries.drop_index_concurrently(schema, index))
        return False

    def _name_blockers(self, exc: BaseException) -> list[core.Blocker]:
        seen = self._watcher.take() if self._watcher is not None else []
        if seen or self._side is None:
            return seen
        statements = core.statements_of(self._last_sql)
        needs = core.preflight.resolve(self._side, None, statements)
        return core.preflight.blockers_for(self._side, needs, min_age=0.0)

