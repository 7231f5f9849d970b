"""The Alembic adapter: each revision in its own transaction, with timeouts and lock retries.

Called from ``env.py`` in place of ``context.configure(...)``, ``context.begin_transaction()``
and ``context.run_migrations()``. The steps Alembic would run are computed once (linear in
the history's length), then run one per transaction with ``SET LOCAL lock_timeout`` /
``statement_timeout``, the ``alembic_version`` update committing with its revision; a
revision that cannot get its locks is rolled back and retried on
:class:`~pgsteady.migrate.apply.Policy`'s schedule, naming the sessions seen in its way.

Revisions that commit for themselves: one whose ``upgrade()`` is a single
``with op.get_context().autocommit_block():`` runs in two parts, the block outside a
transaction (lock_timeout of the try, the policy's index statement_timeout, as for
``-- pgsteady: no-transaction`` files), then the ``alembic_version`` update in a
transaction of its own; it is retried only while nothing of the block has committed. Any
other revision that commits (``op.get_bind().commit()``, or an autocommit block with work
around it) would leave part of itself applied without its history row, so it is refused
before anything runs, with one ``FAILED:`` line naming it; a commit the source check did not
see is caught when it happens and rolled back.
"""

from __future__ import annotations

import ast
import inspect
import logging
import textwrap
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from pgsteady._extras import needs
from pgsteady.errors import BadMigration, MigrationBlocked, MigrationError, PgsteadyError
from pgsteady.migrate import apply, preflight, queries
from pgsteady.migrate.apply import Policy
from pgsteady.migrate.preflight import Blocker
from pgsteady.migrate.watch import BlockerWatch
from pgsteady.settings import pg_interval

log = logging.getLogger("pgsteady.migrate")

SAFE, AUTOCOMMIT = "safe", "autocommit"


class _CommitInsideRevision(Exception):
    """Raised from SQLAlchemy's commit event: a revision tried to commit by itself."""


class _PartlyApplied(Exception):
    """An autocommit block failed after some of its statements had committed."""

    def __init__(self, committed: int) -> None:
        super().__init__(f"{committed} statement(s) committed")
        self.committed = committed


def run_alembic_migrations(
    context: Any, connection: Any, *, policy: Policy | None = None, **configure: Any,
) -> None:
    """Run pending Alembic revisions one transaction each, with timeouts and lock retries.

    Call it from ``env.py``::

        with engine.connect() as connection:
            run_alembic_migrations(context, connection, target_metadata=target_metadata)

    ``connection`` is a SQLAlchemy connection over psycopg 3 (``postgresql+psycopg://``);
    extra keywords go to ``context.configure``. A failure is raised as Alembic's
    ``CommandError`` (one ``FAILED:`` line from the alembic CLI) with the pgsteady error as
    ``__cause__``. Offline (``--sql``) mode passes through unchanged.
    """
    policy = policy or Policy()
    # env.py sees ``alembic.context``, a module proxying the EnvironmentContext; we need the
    # object itself for its options (``fn``: the steps the command wants) and its script.
    context = getattr(context, "_proxy", None) or context
    if context.is_offline_mode():  # --sql: nothing to lock or retry, plain Alembic
        context.configure(connection=connection, **configure)
        with context.begin_transaction():
            context.run_migrations()
        return
    produce_steps = context.context_opts.get("fn")
    if produce_steps is None:
        raise BadMigration("env.py: run_alembic_migrations() must run inside an Alembic command "
                           "(alembic upgrade ...); call it from run_migrations_online()")
    session = {"application_name": apply.application_name(),  # backstops, like migrate's
               "lock_timeout": pg_interval(policy.lock_timeout),
               "statement_timeout": pg_interval(policy.statement_timeout)}
    for name, value in session.items():
        connection.exec_driver_sql(queries.SET_SESSION, {"name": name, "value": value})
    connection.commit()
    # A second session holds the runner lock and looks up blockers: the migration's own
    # session is inside a failed transaction exactly when a blocker needs naming.
    side = connection.engine.raw_connection()
    side_conn = side.driver_connection
    side_conn.autocommit = True
    try:
        side_conn.execute(queries.SET_SESSION, {"name": "application_name",
                                                "value": session["application_name"]})
        apply.backstop(side_conn, policy)
        with apply.runner_lock(side_conn, policy.runner_wait):
            steps = _pending_steps(context, connection, produce_steps, configure)
            kinds = [_check_step(step) for step in steps]  # refuse before anything runs
            runner = _Runner(context, connection, policy, side_conn, configure)
            with runner.watcher:
                runner.run(steps, kinds)
    except PgsteadyError as exc:
        # Alembic's own convention: a CommandError is printed as one line, no traceback.
        # The pgsteady error (MigrationBlocked, MigrationError) stays as __cause__.
        with needs("alembic", "the Alembic adapter"):
            from alembic.util import CommandError  # noqa: PLC0415 - alembic is optional

        raise CommandError(str(exc)) from exc
    finally:
        side.detach()
        side.close()


def _pending_steps(context: Any, connection: Any, produce_steps: Any,
                   configure: dict[str, Any]) -> list[Any]:
    """Every step the command wants, computed once from the current heads (linear)."""
    with connection.begin():
        context.configure(connection=connection, fn=produce_steps, **configure)
        migration_context = context.get_context()
        heads = migration_context.get_current_heads()
        return list(produce_steps(heads, migration_context))


def _label(step: Any) -> str:
    return f"alembic {step.short_log}"


def _check_step(step: Any) -> str:
    """SAFE, AUTOCOMMIT (a lone autocommit block) or MigrationError if it commits midway."""
    function = getattr(step.revision.module, "upgrade" if step.is_upgrade else "downgrade",
                       None)
    if function is None:
        return SAFE
    if not _names_commit(function):  # most revisions: no need to read or parse their source
        return SAFE
    try:
        source = textwrap.dedent(inspect.getsource(function))
        tree = ast.parse(source)
    except (TypeError, OSError, SyntaxError):
        return SAFE  # no source to read: the commit event still guards the run
    commits = _connection_commits(tree)
    blocks = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Attribute) and node.func.attr == "autocommit_block"]
    first = (commits or blocks)[0].lineno if commits or blocks else 1
    where = f"{step.revision.path}:{first + function.__code__.co_firstlineno - 1}"
    if commits:
        raise MigrationError(
            f"{_label(step)} ({where}) commits by itself; pgsteady runs each revision in one "
            f"transaction with its alembic_version row, so a commit midway would leave part of "
            f"it applied without its history row. Nothing was run. Split it into one revision "
            f"per transaction, or put the statements that cannot run in a transaction alone "
            f"in a revision's autocommit_block()")
    if not blocks:
        return SAFE
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.FunctionDef) else []
    body = [s for s in body if not (isinstance(s, ast.Expr) and
                                    isinstance(s.value, ast.Constant))]  # docstrings
    lone = len(blocks) == 1 and len(body) == 1 and isinstance(body[0], ast.With) and \
        any(item.context_expr is blocks[0] for item in body[0].items)
    if not lone:
        raise MigrationError(
            f"{_label(step)} ({where}) does work around its autocommit_block(); the block "
            f"commits what ran before it, so a failure after it would leave part of the "
            f"revision applied without its alembic_version row. Nothing was run. Put the "
            f"autocommit_block() alone in a revision of its own")
    return AUTOCOMMIT


def _names_commit(function: Any) -> bool:
    """Whether ``function``'s code (nested functions and lambdas too) names ``commit`` or
    ``autocommit_block``: a call to either must (``x.commit()`` loads the name). True when
    there is no code to look at, so the source is read then."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None:
        return True
    todo = [code]
    while todo:
        current = todo.pop()
        if "commit" in current.co_names or "autocommit_block" in current.co_names:
            return True
        todo += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    return False


def _connection_commits(tree: ast.AST) -> list[ast.Call]:
    """``op.get_bind().commit()`` and ``conn.commit()`` where ``conn = op.get_bind()``.

    An ORM ``Session(bind=op.get_bind()).commit()`` is left alone: joined to the revision's
    transaction, it does not commit it (and the commit guard would catch it if it did)."""
    def is_bind(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("get_bind", "connect")

    bound = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
             and is_bind(node.value) for target in node.targets if isinstance(target, ast.Name)}
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "commit"
            and (is_bind(node.func.value) or (isinstance(node.func.value, ast.Name)
                                              and node.func.value.id in bound))]


class _Runner:
    """Applies the steps on one SQLAlchemy connection: in batches, or one at a time."""

    def __init__(self, context: Any, connection: Any, policy: Policy, side_conn: Any,
                 configure: dict[str, Any]) -> None:
        self.context = context
        self.connection = connection
        self.policy = policy
        self.side_conn = side_conn
        self.configure = configure
        self.current: list[Any] = []
        self.autocommitted = 0
        self.guard_commits = False
        self.batch = False
        self.step_started = time.monotonic()
        pid = int(connection.exec_driver_sql(queries.BACKEND_PID).scalar())
        connection.commit()
        self.watcher = BlockerWatch(self._watch_connection, pid)
        context.configure(connection=connection, fn=self._next, **configure)
        self._listen()

    def _next(self, heads: Any, migration_context: Any) -> list[Any]:
        return self.current

    def run(self, steps: list[Any], kinds: list[str]) -> None:
        """Every step in order: plain ones in batches, each in its own transaction (Alembic's
        transaction_per_migration, so no step costs more than one round of its own); a step
        that fails on a lock is retried alone on the policy's schedule, then the batch goes
        on after it; a lone autocommit block runs alone."""
        done = 0
        for _ in range(2 * len(steps) + 1):  # each round applies at least one step
            if done >= len(steps):
                return
            if kinds[done] == AUTOCOMMIT:
                self.apply(steps[done], AUTOCOMMIT)
                done += 1
                continue
            end = next((i for i in range(done, len(steps)) if kinds[i] == AUTOCOMMIT),
                       len(steps))
            applied, failure = self._batch(steps[done:end])
            done += applied
            if failure is None:
                continue
            step = steps[done]
            if not _is_lock_failure(failure):
                self._raise_failure(step, failure)
            # logged and named with the retries: apply.with_lock_retries
            self.apply(step, SAFE, first_try=failure, started=self.step_started)
            done += 1

    def _batch(self, steps: list[Any]) -> tuple[int, BaseException | None]:
        """Run ``steps`` in one Alembic pass, a transaction each: (applied, failure).

        Each step commits with its alembic_version row from the callback Alembic calls
        right after recording it, in one message that also opens the next step's
        transaction (``COMMIT; BEGIN``): Alembic's own per-step commit, then the driver's
        BEGIN before the next statement, would be two round trips. SQLAlchemy sees one
        transaction around the pass; its final commit ends an empty one."""
        applied = 0
        cursor = self.connection.connection.driver_connection.cursor()  # one for all steps
        last = time.monotonic()

        def commit_step(step: Any, **_: Any) -> None:
            nonlocal applied, last
            cursor.execute(queries.COMMIT_AND_BEGIN)
            self.watcher.next_try()  # a slow pass of quick steps is not one long wait
            applied += 1
            now = time.monotonic()
            log.info("applied alembic %s in %.0f ms (1 tries)", step.up_revision_id
                     if step.is_upgrade else step.down_revision_ids, (now - last) * 1000)
            last = self.step_started = now

        callbacks = self.configure.get("on_version_apply") or ()
        callbacks = [callbacks] if callable(callbacks) else list(callbacks)
        options = {k: v for k, v in self.configure.items()
                   if k not in ("on_version_apply", "transaction_per_migration")}
        self.context.configure(connection=self.connection, fn=lambda heads, ctx: steps,
                               transaction_per_migration=False,
                               on_version_apply=[*callbacks, commit_step], **options)
        self.step_started = time.monotonic()
        try:
            with self._session_timeouts(self.policy.lock_timeout_for(1),
                                        self.policy.statement_timeout):
                self.batch = True
                try:
                    with self.watcher.watching(), self.context.begin_transaction():
                        self.context.run_migrations()
                        self.guard_commits = False  # the commit that follows is ours
                finally:
                    self.batch = self.guard_commits = False
                    self.connection.rollback()  # a no-op unless a step failed midway
        except Exception as exc:
            return applied, exc
        finally:
            # Back to one step per pass, for retries and autocommit blocks.
            self.context.configure(connection=self.connection, fn=self._next, **self.configure)
        return applied, None

    def _watch_connection(self) -> Any:
        raw = self.connection.engine.raw_connection()
        conn = raw.driver_connection
        raw.detach()
        conn.autocommit = True
        name = apply.application_name().replace("pgsteady-migrate@", "pgsteady-migrate-watch@")
        conn.execute(queries.SET_SESSION, {"name": "application_name", "value": name})
        return conn

    def _listen(self) -> None:
        with needs("alembic", "the Alembic adapter"):
            from sqlalchemy import event  # noqa: PLC0415 - alembic needs sqlalchemy anyway

        def on_begin(conn: Any) -> None:
            if self.batch:  # from here until Alembic records the step, no commit is ours
                self.guard_commits = True

        def on_commit(conn: Any) -> None:
            if self.guard_commits:
                self.guard_commits = False
                # Undo it on the driver itself: SQLAlchemy may see the transaction as gone.
                conn.connection.driver_connection.rollback()
                raise _CommitInsideRevision

        event.listen(self.connection, "begin", on_begin)
        event.listen(self.connection, "commit", on_commit)

    def _on_execute(self, conn: Any, *_: Any) -> None:
        """Counts statements of an autocommit block that committed as they ran (listened to
        only while one runs: every other statement would pay for it)."""
        if conn.connection.driver_connection.autocommit:
            self.autocommitted += 1

    def apply(self, step: Any, kind: str, first_try: BaseException | None = None,
              started: float | None = None) -> None:
        """One step with lock retries; ``first_try``: its try in a batch (begun at
        ``started``) already failed."""
        label = _label(step)
        self.current = [step]
        once = self._autocommit if kind == AUTOCOMMIT else self._transactional
        start = time.monotonic() if started is None else started
        try:
            _, tries = apply.with_lock_retries(
                lambda attempt: once(step, attempt), self.policy, what=label,
                name_blockers=self._name_blockers, failed_try=first_try, started=started)
        except Exception as exc:
            self._raise_failure(step, exc)
        log.info("applied %s in %.0f ms (%d tries)", label, (time.monotonic() - start) * 1000,
                 tries)

    def _raise_failure(self, step: Any, exc: BaseException) -> NoReturn:
        """Turn what a step raised into the one-line MigrationError the CLI prints."""
        label = _label(step)
        if isinstance(exc, (MigrationError, MigrationBlocked)):
            raise exc
        if isinstance(exc, _CommitInsideRevision):
            raise MigrationError(
                f"{label} ({step.revision.path}) commits by itself; it was rolled back, "
                f"nothing of it was applied. Split it into one revision per transaction, or "
                f"put what cannot run in a transaction alone in an autocommit_block()") \
                from None
        if isinstance(exc, _PartlyApplied):
            cause = apply.pg_error(exc.__cause__) if exc.__cause__ else None
            why = apply.describe_pg_error(cause) if cause is not None else str(exc.__cause__)
            raise MigrationError(
                f"{label} failed after {exc.committed} statement(s) of its autocommit_block() "
                f"had committed: {why}; alembic_version was not moved. Finish or undo those "
                f"by hand (or make the block idempotent), then run again") from exc.__cause__
        error = apply.pg_error(exc)
        if error is None:
            raise exc
        raise MigrationError(f"{label} failed: {apply.describe_pg_error(error)}; nothing "
                             f"of it was applied. Fix the revision and run again") from exc

    def _transactional(self, step: Any, attempt: Any) -> None:
        self.watcher.take()
        with self.connection.begin():  # commits with the alembic_version update, or not
            for name, seconds in (("lock_timeout", attempt.lock_timeout),
                                  ("statement_timeout", self.policy.statement_timeout)):
                self.connection.exec_driver_sql(queries.SET_LOCAL,
                                                {"name": name, "value": pg_interval(seconds)})
            self.guard_commits = True
            try:
                with self.watcher.watching():
                    self.context.run_migrations()
            finally:
                self.guard_commits = False

    def _autocommit(self, step: Any, attempt: Any) -> None:
        """The lone autocommit block, then the alembic_version update in its own transaction.

        Retried on a lock failure only while nothing of the block has committed."""
        with needs("alembic", "the Alembic adapter"):
            from sqlalchemy import event  # noqa: PLC0415 - alembic needs sqlalchemy anyway

        self.watcher.take()
        migration_context = self.context.get_context()
        with self._session_timeouts(attempt.lock_timeout, self.policy.index_statement_timeout), \
                self._own_transactions(migration_context):
            self.autocommitted = 0
            event.listen(self.connection, "after_cursor_execute", self._on_execute)
            try:
                with self.watcher.watching():
                    self.context.run_migrations()
            except Exception as exc:
                if self.autocommitted:
                    raise _PartlyApplied(self.autocommitted) from exc
                raise
            finally:
                event.remove(self.connection, "after_cursor_execute", self._on_execute)

    @contextmanager
    def _own_transactions(self, migration_context: Any) -> Iterator[None]:
        """Let Alembic open and commit around the block (autocommit_block needs that)."""
        if self.connection.in_transaction():
            self.connection.commit()
        old = migration_context._transaction_per_migration
        migration_context._transaction_per_migration = True
        try:
            yield
        finally:
            migration_context._transaction_per_migration = old
            if self.connection.in_transaction():
                self.connection.rollback()  # only ever an unfinished, failed part

    @contextmanager
    def _session_timeouts(self, lock_timeout: float, statement_timeout: float) \
            -> Iterator[None]:
        def put(lock: float, statement: float) -> None:
            for name, seconds in (("lock_timeout", lock), ("statement_timeout", statement)):
                self.connection.exec_driver_sql(queries.SET_SESSION,
                                                {"name": name, "value": pg_interval(seconds)})
            self.connection.commit()

        put(lock_timeout, statement_timeout)
        try:
            yield
        finally:
            self.connection.rollback()  # a no-op unless something failed midway
            put(self.policy.lock_timeout, self.policy.statement_timeout)

    def _name_blockers(self, exc: BaseException) -> list[Blocker]:
        seen = self.watcher.take()
        if seen:
            return seen
        statements = apply.statements_of(getattr(exc, "statement", None))
        needs = preflight.resolve(self.side_conn, None, statements, where=_label(
            self.current[0]) if self.current else "")
        return preflight.blockers_for(self.side_conn, needs, min_age=0.0)


def _is_lock_failure(exc: BaseException) -> bool:
    return isinstance(apply.pg_error(exc), apply.RETRYABLE)
