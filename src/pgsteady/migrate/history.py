"""History tables: which migrations a database has, read and written as their tool does.

pgsteady's own table (``pgsteady_migrations``) and each other tool's: ``_prisma_migrations``,
``goose_db_version``, golang-migrate's and dbmate's ``schema_migrations`` (different columns),
``flyway_schema_history``, ``__diesel_schema_migrations``, sql-migrate's ``gorp_migrations``,
tern's ``schema_version``; ``alembic_version`` is read only.
Writing a tool's table exactly as the tool would lets a team keep its tool: after
``pgsteady migrate --tool goose`` the goose CLI sees the same versions applied, and
``pgsteady preflight`` reads what that tool applied.

A migration that runs outside a transaction is marked *started* first where the table can say
so (pgsteady's ``finished``, golang-migrate's ``dirty``, Prisma's ``finished_at``): if the
process dies mid-way, the next run knows which one did not finish instead of guessing.

A run writes one row per migration, so :meth:`Store.prepare` has the server parse and plan
that statement once for the session (SQL ``PREPARE``; the rows sent with migrations are then
``EXECUTE``): on 300 small migrations that was ~10 ms of the server's time, a tenth of what
the bookkeeping costs over the bare statements.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from pgsteady.errors import MigrationError, UsageError
from pgsteady.migrate import queries
from pgsteady.settings import default_label
from pgsteady.tools import histories, registry
from pgsteady.tools.registry import Row

if TYPE_CHECKING:
    from pgsteady.migrate.source import Migration

log = logging.getLogger("pgsteady.migrate")

# A psycopg placeholder in a HISTORY_DML template, or an escaped percent sign.
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


@dataclass(frozen=True)
class _Prepared:
    """A history statement this session has prepared: its name, and its parameters' order."""

    name: str
    params: tuple[str, ...]
    clock: bool = False  # returns the try's seconds (queries.TRY_SECONDS), one row always


def parse_table(text: str, tool: str = "pgsteady") -> tuple[str, str]:
    """``schema.name`` or ``name`` (schema ``public``) -> (schema, name); UsageError if bad."""
    parts = text.split(".") if text else [str(registry.get(tool).history_table)]
    if len(parts) == 1:
        parts = ["public", parts[0]]
    if len(parts) != 2 or not all(parts):
        raise UsageError(f"--history-table {text!r}: write it as schema.name or name, like "
                         f"app.pgsteady_migrations")
    return parts[0], parts[1]


class Store:
    """One tool's history table in ``schema.table``."""

    def __init__(self, tool: str, schema: str = "public", table: str | None = None) -> None:
        if tool not in registry.HISTORIES:
            raise UsageError(f"no history table known for {tool!r}")
        self.tool = tool
        self.kept = registry.get(tool)
        self.schema = schema
        self.table = table or str(self.kept.history_table)
        self._prepared: dict[str, _Prepared] = {}
        self._prepared_on: psycopg.Connection[Any] | None = None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"

    def _statement(self, action: str) -> sql.Composed:
        return queries.history_statement(self.kept.history_dml[action], self.schema,
                                         self.table)

    def exists(self, conn: psycopg.Connection[Any]) -> bool:
        name = sql.Identifier(self.schema, self.table).as_string(conn)
        row = conn.execute(queries.RELATION_EXISTS, {"name": name}).fetchone()
        return bool(row and row[0])

    def raw(self, conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
        if not self.exists(conn):
            return []
        query = queries.history_rows(self.schema, self.table, self.kept.history_order)
        return [r[0] for r in conn.execute(query).fetchall()]

    def refuse_foreign(self, conn: psycopg.Connection[Any]) -> None:
        """UsageError when another runner's history table holding rows is in the schemas
        this run uses (the history's, and ``current_schema()``): that runner keeps this
        database, and the folder read as this tool's would apply its migrations again.
        Names the table and the ``--tool`` that reads it; the caller applies nothing."""
        row = conn.execute(queries.DATABASE_AND_SCHEMA).fetchone()
        schemas = list(dict.fromkeys([self.schema, *([row[1]] if row and row[1] else [])]))
        found = conn.execute(queries.HISTORY_TABLES, {"names": histories.table_names(),
                                                      "patterns": histories.table_patterns(),
                                                      "schemas": schemas}).fetchall()
        beside: dict[str, set[str]] = {}
        for schema, table, _ in found:
            beside.setdefault(schema, set()).add(table)
        for schema, table, columns in found:
            whose = histories.identify(table, columns, beside[schema])
            if whose is None or whose.tool == self.tool:
                continue
            count = conn.execute(queries.rows_up_to(schema, table, _ROWS_SHOWN)).fetchone()
            rows = int(count[0]) if count else 0
            if rows:
                raise UsageError(_foreign_refusal(schema, table, rows, whose, self.kept.display))

    def applied(self, conn: psycopg.Connection[Any],
                migrations: Sequence[Migration] = ()) -> dict[str, Row]:
        """Applied (or started and unfinished) migrations by tag, as the tool counts them."""
        return self.kept.read_history(self.raw(conn), migrations)

    def ensure(self, conn: psycopg.Connection[Any]) -> bool:
        """Create the table as its tool would, if missing (call inside a transaction);
        whether it was missing."""
        if not self.kept.writes_history:
            raise UsageError(f"pgsteady reads {self.kept.history_table} but never writes it; "
                             f"run {self.kept.display} through "
                             f"pgsteady.migrate.run_alembic_migrations instead")
        existed = self.exists(conn)
        conn.execute(queries.history_statement(self.kept.history_ddl, self.schema, self.table))
        seed = self.kept.history_seed
        if seed and not existed:
            conn.execute(queries.history_statement(seed, self.schema, self.table))
        for column, action in self.kept.history_added if existed else ():
            name = sql.Identifier(self.schema, self.table).as_string(conn)
            row = conn.execute(queries.HISTORY_COLUMN_EXISTS,
                               {"table": name, "column": column}).fetchone()
            if not (row and row[0]):  # a table from before the column: add it once
                conn.execute(self._statement(action))
        return not existed

    def drop_if_unchanged(self, conn: psycopg.Connection[Any],
                          rows: list[dict[str, Any]]) -> None:
        """Drop the table this run created if it still holds only ``rows`` (what it held
        when created): a first run that applied nothing leaves the database as it found it.
        Best effort; a failure to drop is logged, never raised over the run's own error."""
        if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            return
        try:
            with conn.transaction():
                if self.raw(conn) == rows:
                    conn.execute(sql.SQL("DROP TABLE {}").format(
                        sql.Identifier(self.schema, self.table)))
                    log.info("dropped %s, which this run created and applied nothing to",
                             self.qualified)
        except psycopg.Error as exc:
            log.warning("could not drop %s, which this run created: %s", self.qualified, exc)

    def _params(self, migration: Migration, tries: int, seconds: float,
                finished: bool) -> dict[str, Any]:
        return {"version": migration.version, "tag": migration.tag, "name": migration.name,
                "checksum": migration.checksum, "duration_ms": round(seconds * 1000),
                "tries": tries, "finished": finished,
                "id": self.kept.row_id(),
                "script": migration.path.name, "type": "SQL",
                "repeatable": migration.repeatable,
                "applied_by": _applied_by()}

    def start(self, conn: psycopg.Connection[Any], migration: Migration) -> None:
        """Mark ``migration`` started, before it runs outside a transaction (autocommit)."""
        actions = self.kept.start_actions
        if not actions:
            return  # the tool's table cannot say "started"
        params = self._params(migration, 0, 0.0, False)
        with conn.transaction() if len(actions) > 1 else nullcontext():
            for action in actions:
                takes = "%(" in self.kept.history_dml[action]
                conn.execute(self._statement(action), params if takes else None)

    def unstart(self, conn: psycopg.Connection[Any], migration: Migration) -> None:
        """Undo :meth:`start` after a clean failure (the statement did not take effect).
        golang-migrate stays dirty, as golang-migrate itself leaves it."""
        if "unstart" in self.kept.history_dml:
            conn.execute(self._statement("unstart"), self._params(migration, 0, 0.0, False))

    def record(self, conn: psycopg.Connection[Any], migration: Migration, tries: int,
               seconds: float) -> None:
        """Record ``migration`` applied; inside its transaction when it has one."""
        for statement, params in self._record(migration, tries, seconds):
            conn.execute(statement, params)

    def record_sql(self, conn: psycopg.Connection[Any], migration: Migration, tries: int,
                   seconds: float) -> list[str]:
        """:meth:`record` as SQL text with its values bound, to send with the migration
        (``EXECUTE`` of the prepared statement after :meth:`prepare` on ``conn``)."""
        cursor = psycopg.ClientCursor(conn)
        out = []
        for action, params in self._record_steps(migration, tries, seconds):
            prepared = self._prepared.get(action) if conn is self._prepared_on else None
            if prepared is None:
                out.append(cursor.mogrify(self._statement(action), params))
            elif not prepared.params:
                out.append(f"EXECUTE {prepared.name}")
            else:
                marks = ", ".join(["%s"] * len(prepared.params))
                values = [(params or {})[name] for name in prepared.params]
                out.append(cursor.mogrify(f"EXECUTE {prepared.name}({marks})", values))
        return out

    def prepare(self, conn: psycopg.Connection[Any]) -> None:
        """Prepare the statements of :meth:`record_sql` on ``conn``, for this session (the
        table must exist). Best effort: where the server refuses (a session-mode pool that
        kept a statement of that name), rows are sent as plain statements, as before."""
        steps = self._record_steps(None, 1, 0.0)
        for action, _ in steps:
            name = f"pgsteady_history_{action.replace('-', '_')}"
            order: list[str] = []

            def number(match: re.Match[str], order: list[str] = order) -> str:
                if match[1] is None:
                    return "%"
                if match[1] not in order:
                    order.append(match[1])
                return f"${order.index(match[1]) + 1}"

            text = _PLACEHOLDER.sub(number, self._statement(action).as_string(conn))
            # pgsteady's row is one INSERT ... ON CONFLICT DO UPDATE: exactly one row back,
            # so it can read the clock too, one statement less per migration
            clock = self.kept.record_one_row and action == "record"
            if clock:
                text += f"\nRETURNING {queries.TRY_SECONDS_EXPR}"
            try:
                conn.execute(f"PREPARE {name} AS {text}")  # type: ignore[arg-type,unused-ignore]
            except psycopg.Error as exc:
                if not conn.closed and conn.info.transaction_status != \
                        psycopg.pq.TransactionStatus.IDLE:
                    conn.execute("ROLLBACK")
                log.debug("history rows sent unprepared: %s", str(exc).strip())
                self.unprepare(conn)
                return
            self._prepared[action] = _Prepared(name, tuple(order), clock)
            self._prepared_on = conn

    def reads_clock(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether the last of :meth:`record_sql`'s statements on ``conn`` returns the try's
        seconds, as ``queries.TRY_SECONDS`` would."""
        prepared = self._prepared.get("record") if conn is self._prepared_on else None
        return prepared is not None and prepared.clock

    def unprepare(self, conn: psycopg.Connection[Any]) -> None:
        """Drop what :meth:`prepare` made, so a pooled session is handed on as it came."""
        prepared, self._prepared, self._prepared_on = self._prepared, {}, None
        if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            return
        for one in prepared.values():
            try:
                conn.execute(f"DEALLOCATE {one.name}")  # type: ignore[arg-type,unused-ignore]
            except psycopg.Error:
                log.debug("could not deallocate %s", one.name, exc_info=True)

    def _record_steps(self, migration: Migration | None, tries: int,
                      seconds: float) -> list[tuple[str, dict[str, Any] | None]]:
        """The history statements of a migration recorded (actions of ``HISTORY_DML``) and
        their values (None: no migration, only the actions)."""
        params = None if migration is None else self._params(migration, tries, seconds, True)
        if params is not None and tries == 0:  # recorded without running
            self.kept.baseline_row(params)
        return [(action, params if action == "record" else None)
                for action in self.kept.record_actions]

    def _record(self, migration: Migration, tries: int,
                seconds: float) -> list[tuple[sql.Composed, dict[str, Any] | None]]:
        return [(self._statement(action), params)
                for action, params in self._record_steps(migration, tries, seconds)]

    def forget(self, conn: psycopg.Connection[Any], row: Row) -> None:
        """Remove an applied version whose file is gone (``--accept`` of a missing one)."""
        if "forget" not in self.kept.history_dml:
            raise UsageError(f"{self.tool} keeps only its current version; fix the folder "
                             f"instead (the file of that version must exist)")
        stored = row.stored or row.tag
        conn.execute(self._statement("forget"), {"version": _as_int(stored), "tag": stored})

    def realign(self, conn: psycopg.Connection[Any], migration: Migration,
                row: Row | None = None) -> None:
        """Accept the file as it is now (``--accept`` of an edited or unfinished one); ``row``:
        its history row, found by the version the table holds."""
        if "realign" in self.kept.history_dml:
            params = self._params(migration, 0, 0.0, True)
            if row is not None and row.stored is not None:
                params["tag"] = row.stored
            changed = conn.execute(self._statement("realign"), params).rowcount
            if changed == 0:  # never say "accepted" for a row that did not change
                raise MigrationError(f"--accept {migration.tag}: no row of "
                                     f"{self.qualified} changed; see pgsteady migrate --status")
        else:  # the other tools keep no checksum: record it as applied
            self.record(conn, migration, 0, 0.0)


_ROWS_SHOWN = 100_000  # a history's rows are counted up to this


def _foreign_refusal(schema: str, table: str, rows: int, whose: histories.Signature,
                     display: str) -> str:
    """One line: which runner keeps this database, and what to do instead."""
    many = f"{rows}{'+' if rows >= _ROWS_SHOWN else ''} row{'s' if rows != 1 else ''}"
    how = (f"pass --tool {whose.tool} to read it (and check that --dir is that tool's folder)"
           if whose.tool is not None else
           f"migrate it with {whose.runner} itself (pgsteady does not run its folders)")
    return (f"{schema}.{table} holds {whose.runner}'s history ({many}): another migration "
            f"runner keeps this database, and the folder read as {display}'s would apply its "
            f"migrations again; nothing applied. {how}")


def _as_int(tag: str) -> int | None:
    return int(tag) if tag.isdigit() else None


def _applied_by() -> str:
    """The runner's label, as ``apply.application_name()`` (not imported: apply imports us)."""
    return default_label("pgsteady-migrate")[:63]
