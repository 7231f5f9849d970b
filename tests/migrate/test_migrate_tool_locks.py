"""``pgsteady migrate`` takes the migration lock of the folder's own tool as well as its
runner lock: while ``prisma migrate deploy``, golang-migrate, Flyway, tern or goose hold
theirs, pgsteady waits its bounded time and names them, and while pgsteady runs, they wait."""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from migrate_helpers import FAST, write_migrations

from pgsteady.errors import MigrationBlocked
from pgsteady.lab import _process
from pgsteady.lab.cluster import Postgres, make_workdir
from pgsteady.migrate import apply, source
from pgsteady.tools._base import go_advisory_lock_id

QUICK = dataclasses.replace(FAST, runner_wait=0.5)

# One tiny migration per tool, creating table t.
FOLDERS: dict[str, dict[str, str]] = {
    "prisma": {"20240101000000_init/migration.sql": "CREATE TABLE t (id int);\n"},
    "golang-migrate": {"1_init.up.sql": "CREATE TABLE t (id int);\n"},
    "flyway": {"V1__init.sql": "CREATE TABLE t (id int);\n"},
    "tern": {"001_init.sql": "CREATE TABLE t (id int);\n"
                             "---- create above / drop below ----\nDROP TABLE t;\n"},
    "goose": {"1_init.sql": "-- +goose Up\nCREATE TABLE t (id int);\n"},
}


def _folder(tmp_path, tool: str, sql: str | None = None):
    files = dict(FOLDERS[tool])
    if sql is not None:
        files = {name: sql for name in files}
    for name in files:
        (tmp_path / "m" / name).parent.mkdir(parents=True, exist_ok=True)
    return write_migrations(tmp_path / "m", files)


def _exists(dsn: str, relation: str) -> bool:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT to_regclass(%s) IS NOT NULL", [relation]).fetchone()[0]


def _dbname(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        return str(conn.execute("SELECT current_database()").fetchone()[0])


def _key(tool: str, dsn: str) -> int:
    """The key the tool's own runner takes on this test's database (public schema)."""
    if tool == "golang-migrate":  # the CLI's form: the URL path, with its slash
        return go_advisory_lock_id("public", "schema_migrations", "/" + _dbname(dsn))
    return {"prisma": 72707369, "flyway": 77433833903597, "tern": 9628173550095224,
            "goose": 4097083626}[tool]


@pytest.mark.parametrize("tool", sorted(FOLDERS))
def test_waits_for_the_tools_own_lock_and_names_its_holder(tmp_path, db, tool):
    """A session holding the tool's lock makes migrate wait --runner-wait, then fail naming
    it, with nothing applied and no history table made."""
    key = _key(tool, db)
    migrations = source.load_dir(_folder(tmp_path, tool), tool)
    with psycopg.connect(db, autocommit=True, application_name="the-tools-runner") as holder:
        holder.execute("SELECT pg_advisory_lock(%s::int8)", [key])
        pid = holder.info.backend_pid
        start = time.monotonic()
        with pytest.raises(MigrationBlocked) as err:
            apply.migrate(db, migrations, QUICK)
        waited = time.monotonic() - start
    message = str(err.value)
    assert message.startswith(f"another migration runner is active: pid {pid} "
                              f"'the-tools-runner'")
    assert f"migration lock, advisory lock {key})" in message
    assert 0.4 <= waited < 10
    assert not _exists(db, "public.t")
    history = apply.store_of(QUICK, migrations).qualified
    assert not _exists(db, history)


def test_golang_migrate_library_key_is_taken_too(tmp_path, db):
    """golang-migrate run as a library (WithInstance) names the database without the slash:
    that key also keeps pgsteady out."""
    key = go_advisory_lock_id("public", "schema_migrations", _dbname(db))
    migrations = source.load_dir(_folder(tmp_path, "golang-migrate"), "golang-migrate")
    with psycopg.connect(db, autocommit=True, application_name="migrate-lib") as holder:
        holder.execute("SELECT pg_advisory_lock(%s::int8)", [key])
        with pytest.raises(MigrationBlocked) as err:
            apply.migrate(db, migrations, QUICK)
    assert "'migrate-lib'" in str(err.value)
    assert not _exists(db, "public.t")


def test_the_tool_cannot_take_its_lock_while_pgsteady_runs(tmp_path, db):
    """While pgsteady applies a Prisma folder, Prisma's own lock is held by pgsteady: a
    ``prisma migrate deploy`` would wait; once pgsteady is done, the lock is free."""
    migrations = source.load_dir(
        _folder(tmp_path, "prisma", "SELECT pg_sleep(1.5);\nCREATE TABLE t (id int);\n"),
        "prisma")
    runner = threading.Thread(target=apply.migrate, args=(db, migrations, FAST))
    runner.start()
    try:
        with psycopg.connect(db, autocommit=True) as other:
            holder = None
            for _ in range(100):  # until pgsteady has its locks (a busy host may be slow)
                holder = other.execute(
                    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a "
                    "USING (pid) WHERE l.locktype = 'advisory' AND l.granted "
                    "AND l.classid = 0 AND l.objid = 72707369 AND l.objsubid = 1").fetchone()
                if holder is not None:
                    break
                time.sleep(0.05)
            assert holder is not None and holder[0].startswith("pgsteady-migrate@")
            assert other.execute("SELECT pg_try_advisory_lock(72707369)").fetchone()[0] \
                is False
    finally:
        runner.join(30)
    assert _exists(db, "public.t")
    with psycopg.connect(db, autocommit=True) as other:
        assert other.execute("SELECT pg_try_advisory_lock(72707369)").fetchone()[0] is True


@pytest.fixture(scope="module")
def app_server() -> Iterator[Postgres]:
    """A throwaway PostgreSQL with a database called ``app`` (the worked examples' name)."""
    who = _process.run_as()
    server = Postgres(make_workdir(None, who), who=who)
    server.start()
    try:
        server.create_database("app")
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


@pytest.mark.parametrize(("tool", "table", "keys"), [
    ("golang-migrate", "schema_migrations", [1726534663, 1787120056, 1037453835920848937]),
    ("flyway", "flyway_schema_history", [77433833903597]),
])
def test_keys_for_the_connections_database_match_the_tools(app_server, tool, table, keys):
    """On a database named app, schema public, the keys read from the session are those
    golang-migrate's CLI and library and Flyway take there."""
    with apply.connect(app_server.dsn("app")) as conn:
        found = apply.tool_locks(conn, tool, "public", table)
    assert [lock.key for lock in found] == keys


def test_coders_own_migration_lock_keeps_pgsteady_out(tmp_path, db):
    """coder runs golang-migrate through its own driver, holding pg_advisory_xact_lock of
    1037453835920848937 for the whole run (one transaction): while it is held, migrate of a
    golang-migrate folder waits its bounded time, names coder's session, applies nothing."""
    migrations = source.load_dir(_folder(tmp_path, "golang-migrate"), "golang-migrate")
    with psycopg.connect(db, application_name="coderd") as holder:  # a transaction open
        holder.execute("SELECT pg_advisory_xact_lock(1037453835920848937)")
        pid = holder.info.backend_pid
        with pytest.raises(MigrationBlocked) as err:
            apply.migrate(db, migrations, QUICK)
        holder.rollback()
    message = str(err.value)
    assert message.startswith(f"another migration runner is active: pid {pid} 'coderd'"), message
    assert "advisory lock 1037453835920848937" in message
    assert not _exists(db, "public.t")
