"""pytest helpers for your migrations: hold a lock elsewhere, assert a fast, clean failure.

The CI check the seed asks for: a test holds a lock on a table in another session and asserts
that the migration fails within its budget and changes nothing::

    def test_add_column_gives_up_fast(pgsteady_lock_holder, my_database_dsn):
        pgsteady_lock_holder(my_database_dsn, "orgs", "ACCESS SHARE")
        assert_fails_fast_and_applies_nothing(
            my_database_dsn, "migrations", Policy(lock_timeout=0.3, retry_budget=2))

``pgsteady_lock_holder`` is registered by pgsteady's pytest plugin automatically.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pgsteady.errors import MigrationError
from pgsteady.migrate import queries
from pgsteady.migrate.apply import Policy, connect, migrate, store_of
from pgsteady.migrate.source import Migration, load_dir
from pgsteady.sql.analysis import LockMode


class LockHolder:
    """Another session with an open transaction holding ``mode`` on ``table``."""

    def __init__(self, dsn: str, table: str, mode: LockMode | str = LockMode.ACCESS_SHARE, *,
                 schema: str | None = None, application_name: str = "pgsteady-lock-holder",
                 select: bool = False) -> None:
        self.mode = LockMode(mode.upper() if isinstance(mode, str) else mode)
        if select and self.mode is not LockMode.ACCESS_SHARE:
            raise ValueError("select=True takes ACCESS SHARE; use LOCK for other modes")
        self.table = table
        name = sql.Identifier(schema, table) if schema else sql.Identifier(table)
        self.conn = psycopg.connect(dsn, application_name=application_name,
                                    connect_timeout=10)
        try:
            if select:  # as a long report query would: a read, left open
                self.conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name))
            else:
                self.conn.execute(sql.SQL("LOCK TABLE {} IN {} MODE").format(
                    name, sql.SQL(self.mode.value)))  # value checked by LockMode above
        except BaseException:
            self.conn.close()
            raise
        self.pid = self.conn.info.backend_pid

    def release(self) -> None:
        """End the transaction (and the session); the lock goes with it."""
        if not self.conn.closed:
            self.conn.rollback()
            self.conn.close()


def lock_holders() -> Iterator[Callable[..., LockHolder]]:
    """``hold(dsn, table, mode="ACCESS SHARE", ...) -> LockHolder``; all released afterwards
    (the ``pgsteady_lock_holder`` fixture's body)."""
    holders: list[LockHolder] = []

    def hold(dsn: str, table: str, mode: LockMode | str = LockMode.ACCESS_SHARE,
             **kwargs: Any) -> LockHolder:
        holder = LockHolder(dsn, table, mode, **kwargs)
        holders.append(holder)
        return holder

    try:
        yield hold
    finally:
        for holder in holders:
            holder.release()


pgsteady_lock_holder = pytest.fixture(lock_holders, name="pgsteady_lock_holder")


@dataclass(frozen=True)
class Snapshot:
    """The catalog of every user relation, and the history table's rows."""

    schema: tuple[str, ...]
    history: tuple[tuple[str, str | None, str | None, bool], ...]


def snapshot(dsn: str, policy: Policy | None = None,
             migrations: Sequence[Migration] = ()) -> Snapshot:
    policy = policy or Policy()
    with connect(dsn) as conn:
        rows = conn.execute(queries.SCHEMA_SNAPSHOT).fetchall()
        history = store_of(policy, migrations).applied(conn, migrations)
    return Snapshot(tuple(str(r[0]) for r in rows),
                    tuple((r.tag, r.name, r.checksum, r.finished)
                          for _, r in sorted(history.items())))


@dataclass(frozen=True)
class FastFailure:
    error: MigrationError
    seconds: float


def assert_fails_fast_and_applies_nothing(
    dsn: str, migrations: Sequence[Migration] | str | Path, policy: Policy, *,
    slack: float = 1.0, check_first: bool = False,
) -> FastFailure:
    """Run the migrations; assert they fail within ``retry_budget + slack`` seconds and that
    the schema and the history are exactly as before. The preflight is skipped by default,
    so the lock timeouts and retries themselves are what is tested.
    """
    if isinstance(migrations, str | Path):
        migrations = load_dir(migrations)
    before = snapshot(dsn, policy, migrations)
    start = time.monotonic()
    try:
        migrate(dsn, migrations, policy, check_first=check_first)
    except MigrationError as exc:
        error = exc
    else:
        raise AssertionError("the migrations applied; expected them to fail fast while the "
                             "lock is held")
    seconds = time.monotonic() - start
    # One budget per migration; the first pending one is the one that must give up.
    limit = policy.retry_budget + slack
    assert seconds <= limit, (
        f"the migration took {seconds:.2f}s to fail; its budget was {policy.retry_budget:g}s "
        f"(+{slack:g}s slack)")
    after = snapshot(dsn, policy, migrations)
    if after != before:
        diff = "\n".join(difflib.unified_diff(
            [*before.schema, *map(str, before.history)], [*after.schema, *map(str, after.history)],
            "before", "after", lineterm=""))
        raise AssertionError(f"the failed migration changed the database:\n{diff}")
    return FastFailure(error, seconds)
