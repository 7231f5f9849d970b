"""Transactional migrations as one simple-query message: one migration, or several in a row.

PostgreSQL runs the statements of a simple Query message in order and, at the first error,
skips the rest of the message. So ``BEGIN; timeouts; statements; history row; COMMIT``
repeated for several migrations in one message keeps exactly what one round trip per
statement gives: every migration before a failing one has committed with its history row,
the failing one's transaction is aborted (and rolled back here), nothing after it has run.
Counting the results tells which statement failed and where its text began in the message,
so PostgreSQL's error position still maps to ``file:line:col``. The server parses the whole
message before it runs any of it, so a statement pglast accepts but this server's parser does
not (a newer major version's syntax) refuses the message with nothing run:
:class:`MessageRefused`, and the caller sends the migrations again alone, statement by
statement for the one refused. Each migration reads the server's clock before its COMMIT
(its history row returns it, or a SELECT does), so a batch still says how long each one took
(statement timestamps are per message, so the history row's duration counts from the
migration's own start, kept in a transaction-local setting, not from ``now()``).

A psql session needs a round trip per statement; this needs one per message. ``migrate``
sends one migration per message, the next only after the server answered: the server finishes
a message it has received even when the client is gone, so several in one message would let a
killed runner's migrations commit after it (:mod:`~pgsteady.migrate.apply`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from pgsteady.migrate import queries
from pgsteady.settings import pg_interval

if TYPE_CHECKING:
    from pgsteady.migrate.source import Migration
    from pgsteady.sql.analysis import StatementInfo

SEPARATOR = "\n;\n"  # a statement may end in a -- comment
_NOT_A_STATEMENT = -1


class StatementFailed(Exception):
    """Carries which statement failed out of the rolled-back transaction.

    ``sent_offset``: where the statement's text started in the query string sent, so
    PostgreSQL's error position (``diag.statement_position``, 1-based, over that string)
    minus it is the position within the statement."""

    def __init__(self, where: str, statement: StatementInfo, cause: psycopg.Error,
                 sent_offset: int = 0) -> None:
        super().__init__(str(cause))
        self.where = where
        self.statement = statement
        self.cause = cause
        self.sent_offset = sent_offset


class MessageRefused(Exception):
    """The server's parser refused the message: none of it ran (``cause``: its error)."""

    def __init__(self, cause: psycopg.Error) -> None:
        super().__init__(str(cause))
        self.cause = cause


@dataclass(frozen=True)
class Sent:
    """What one message did: how many of its migrations committed (in order), the server's
    seconds for each of them, and why the next one did not (None when all committed)."""

    committed: int
    seconds: tuple[float, ...]
    failure: BaseException | None


class _CountingCursor(psycopg.Cursor[Any]):
    """Keeps the results of a multi-statement query, and how many succeeded before an
    error, so a message holding many statements still names the one that failed."""

    succeeded: int | None = None
    received: tuple[Any, ...] = ()

    def _check_results(self, results: list[Any]) -> None:
        fatal = psycopg.pq.ExecStatus.FATAL_ERROR
        self.received = tuple(results)
        self.succeeded = next((i for i, r in enumerate(results) if r.status == fatal),
                              len(results))
        super()._check_results(results)


def send(conn: psycopg.Connection[Any], migrations: Sequence[Migration],
         records: Sequence[Sequence[str]], *, lock_timeout: float,
         statement_timeout: float, record_reads_clock: bool = False) -> Sent:
    """Apply ``migrations`` in one message, each in its own transaction with its history row
    (``records``: each one's SQL, values bound; ``record_reads_clock``: the last of them
    returns the try's seconds, so no separate clock read). Never raises for a database
    error: the failure comes back in :class:`Sent`, a :class:`StatementFailed` when it was one
    of the migrations' own statements, the connection idle again."""
    timeouts = psycopg.ClientCursor(conn).mogrify(queries.SET_LOCAL_TIMEOUTS, {
        "lock_timeout": pg_interval(lock_timeout),
        "statement_timeout": pg_interval(statement_timeout)})
    parts: list[str] = []
    owners: list[tuple[int, int]] = []  # per part: (migration, statement or _NOT_A_STATEMENT)
    clocks: list[int] = []  # the parts that read each migration's time
    commits: list[int] = []  # the parts that commit each migration
    for number, (migration, record) in enumerate(zip(migrations, records, strict=True)):
        parts += ["BEGIN", timeouts]
        owners += [(number, _NOT_A_STATEMENT)] * 2
        for index, part in enumerate(migration.parts):  # text only: no analysis needed
            parts.append(part.sql)
            owners.append((number, index))
        parts += record
        owners += [(number, _NOT_A_STATEMENT)] * len(record)
        if record_reads_clock and record:
            clocks.append(len(parts) - 1)
        else:
            clocks.append(len(parts))
            parts.append(queries.TRY_SECONDS)
            owners.append((number, _NOT_A_STATEMENT))
        commits.append(len(parts))
        parts.append("COMMIT")
        owners.append((number, _NOT_A_STATEMENT))
    cursor = _CountingCursor(conn)
    failure: BaseException | None = None
    try:
        cursor.execute(SEPARATOR.join(parts))  # type: ignore[arg-type,unused-ignore]  # user SQL
    except psycopg.Error as exc:
        failure = exc
        if not conn.closed and conn.info.transaction_status != \
                psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
    reached = len(parts) if failure is None else cursor.succeeded
    seconds = tuple(_seconds(cursor.received[c]) for c in clocks
                    if reached is not None and c < reached)
    if failure is None:
        return Sent(len(migrations), seconds, None)
    assert isinstance(failure, psycopg.Error)
    if reached is None:
        if isinstance(failure, psycopg.OperationalError):
            return Sent(0, (), failure)
        # cannot tell which one (psycopg changed?): the first, with the error itself
        first = next((m for m in migrations if m.statements), None)
        if first is None:
            return Sent(0, (), failure)
        return Sent(0, (), _failed(first.path.name, first.statements[0], failure, 0))
    if reached == 0 and not isinstance(failure, psycopg.OperationalError):
        return Sent(0, (), MessageRefused(failure))  # not even its BEGIN ran
    committed = sum(1 for c in commits if c < reached)
    number, index = owners[reached] if reached < len(owners) else (committed, _NOT_A_STATEMENT)
    if index == _NOT_A_STATEMENT:
        return Sent(committed, seconds, failure)
    migration = migrations[number]
    statement = migration.statements[index]
    offset = sum(len(p) + len(SEPARATOR) for p in parts[:reached])
    return Sent(committed, seconds, _failed(migration.where(statement), statement, failure,
                                            offset))


def _failed(where: str, statement: StatementInfo, cause: psycopg.Error,
            offset: int) -> StatementFailed:
    failed = StatementFailed(where, statement, cause, offset)
    failed.__cause__ = cause
    return failed


def _seconds(result: Any) -> float:
    value = result.get_value(0, 0)
    return float(value) if value is not None else 0.0
