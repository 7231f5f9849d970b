"""A database another migration runner keeps is refused before anything runs (exit 2, the
table named, and the --tool that reads it); sqlx is a tool of its own, its history written as
sqlx writes it."""

from __future__ import annotations

import hashlib

import psycopg
from migrate_helpers import columns, run_cli, write_migrations

MATTERMOST_LIKE = {
    "000001_create_users.up.sql": "CREATE TABLE users (id int PRIMARY KEY);\n",
    "000001_create_users.down.sql": "DROP TABLE users;\n",
    "000002_add_email.up.sql": "ALTER TABLE users ADD COLUMN email text;\n",
    "000002_add_email.down.sql": "ALTER TABLE users DROP COLUMN email;\n",
}
# sqlx's DDL for PostgreSQL (sqlx-postgres/src/migrate.rs, ensure_migrations_table)
SQLX_DDL = """CREATE TABLE IF NOT EXISTS _sqlx_migrations (
    version BIGINT PRIMARY KEY, description TEXT NOT NULL,
    installed_on TIMESTAMPTZ NOT NULL DEFAULT now(), success BOOLEAN NOT NULL,
    checksum BYTEA NOT NULL, execution_time BIGINT NOT NULL)"""


def _tables(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute(
            "SELECT relname::text FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "AND relkind = 'r' ORDER BY 1").fetchall()]


def test_a_database_morph_keeps_is_refused_and_nothing_applied(tmp_path, db):
    """A Mattermost database (its runner's db_migrations holds rows) and a folder of
    *.up.sql files: --status, --plan, preflight and migrate exit 2 naming the table; no
    migration runs, no history table is created."""
    folder = write_migrations(tmp_path / "m", MATTERMOST_LIKE)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CREATE TABLE db_migrations (version bigint NOT NULL PRIMARY KEY, "
                      "name varchar NOT NULL)")
        conn.execute("INSERT INTO db_migrations VALUES (1, 'create_users'), "
                     "(2, 'add_email')")
    for args in (["migrate", "--status"], ["migrate", "--plan"], ["preflight"], ["migrate"]):
        done = run_cli(*args, "--dsn", db, "--dir", str(folder))
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "public.db_migrations holds morph (Mattermost)'s history (2 rows)" in done.stderr
        assert "nothing applied" in done.stderr and "Traceback" not in done.stderr
    assert _tables(db) == ["db_migrations"]


def test_morph_with_a_prefixed_table_name_is_refused_too(tmp_path, db):
    """morph lets a project name its table (Mattermost's plugins: SetMigrationTableName
    ("IR_db_migrations")): such a database is refused as well (it said 83 pending, exit 0,
    and re-ran 23 applied migrations), while a table merely ending in the name, with other
    columns, is nobody's history."""
    folder = write_migrations(tmp_path / "m", MATTERMOST_LIKE)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CREATE TABLE shop_db_migrations (id int, note text)")  # not morph's
        conn.execute("INSERT INTO shop_db_migrations VALUES (1, 'x')")
        conn.execute("CREATE TABLE ir_db_migrations (version bigint NOT NULL PRIMARY KEY, "
                     "name varchar NOT NULL)")
        conn.execute("INSERT INTO ir_db_migrations VALUES (1, 'create_users')")
    done = run_cli("migrate", "--status", "--dsn", db, "--dir", str(folder))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "public.ir_db_migrations holds morph (Mattermost)'s history (1 row" in done.stderr
    assert "shop_db_migrations" not in done.stderr
    assert _tables(db) == ["ir_db_migrations", "shop_db_migrations"]


def test_an_empty_foreign_table_is_no_reason_to_refuse(tmp_path, db):
    """Another runner's table without rows (created, never used) does not stop the run."""
    folder = write_migrations(tmp_path / "m", MATTERMOST_LIKE)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CREATE TABLE db_migrations (version bigint PRIMARY KEY, name varchar)")
    done = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert done.returncode == 0, done.stderr
    assert columns(db, "users") == ["id", "email"]


def test_golang_migrate_and_dbmate_tables_are_told_apart_by_columns(tmp_path, db):
    """schema_migrations as dbmate writes it (one text column) is not golang-migrate's: the
    folder read as golang-migrate's is refused, and dbmate named."""
    folder = write_migrations(tmp_path / "m", MATTERMOST_LIKE)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_migrations (version varchar(128) PRIMARY KEY)")
        conn.execute("INSERT INTO schema_migrations VALUES ('20240101000001')")
    done = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert done.returncode == 2, done.stderr
    assert "public.schema_migrations holds dbmate's history (1 row)" in done.stderr
    assert "pass --tool dbmate" in done.stderr
    assert "users" not in _tables(db)


SQLX_FOLDER = {
    "20240101000001_create_users.sql": "CREATE TABLE users (id int PRIMARY KEY);\r\n",
    "20240101000002_add_email.sql": "\ufeffALTER TABLE users ADD COLUMN email text;\n",
    "20240101000003_email_index.sql": "-- no-transaction\n"
                                      "CREATE INDEX CONCURRENTLY users_email ON users (email);\n",
}


def _write_bytes(folder, files):
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_bytes(text.encode())
    return folder


def test_sqlx_history_rows_are_what_sqlx_writes(tmp_path, db):
    """--tool sqlx writes _sqlx_migrations with sqlx's columns and types, one row per file:
    the version, the description (underscores as spaces), success, the SHA-384 of the
    file's bytes (CRLF and BOM included) and the execution time in nanoseconds."""
    folder = _write_bytes(tmp_path / "migrations", SQLX_FOLDER)
    done = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--tool", "sqlx")
    assert done.returncode == 0, done.stderr
    with psycopg.connect(db, autocommit=True) as conn:
        rows = conn.execute("SELECT version, description, success, checksum, execution_time "
                            "FROM _sqlx_migrations ORDER BY version").fetchall()
        ours = conn.execute(
            "SELECT attname::text, format_type(atttypid, atttypmod), attnotnull "
            "FROM pg_attribute WHERE attrelid = '_sqlx_migrations'::regclass AND attnum > 0 "
            "ORDER BY attnum").fetchall()
        conn.execute("CREATE SCHEMA sqlx_own")
        conn.execute("SET search_path = sqlx_own")
        conn.execute(SQLX_DDL)
        theirs = conn.execute(
            "SELECT attname::text, format_type(atttypid, atttypmod), attnotnull "
            "FROM pg_attribute WHERE attrelid = 'sqlx_own._sqlx_migrations'::regclass "
            "AND attnum > 0 ORDER BY attnum").fetchall()
    assert ours == theirs
    names = sorted(SQLX_FOLDER)
    assert [(v, d, s, bytes(c)) for v, d, s, c, _ in rows] == [
        (20240101000001, "create users", True,
         hashlib.sha384((folder / names[0]).read_bytes()).digest()),
        (20240101000002, "add email", True,
         hashlib.sha384((folder / names[1]).read_bytes()).digest()),
        (20240101000003, "email index", True,
         hashlib.sha384((folder / names[2]).read_bytes()).digest())]
    assert all(0 < r[4] < 60 * 10**9 for r in rows)  # nanoseconds, under a minute
    assert columns(db, "users_email") == ["email"]


def test_a_database_sqlx_migrated_is_recognised(tmp_path, db):
    """A database sqlx migrated (rows as sqlx writes them) with the folder read as
    pgsteady's is refused, naming _sqlx_migrations and --tool sqlx; with --tool sqlx its
    rows match the files (applied, nothing pending) and the third file applies."""
    folder = _write_bytes(tmp_path / "migrations", SQLX_FOLDER)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id int PRIMARY KEY)")
        conn.execute("ALTER TABLE users ADD COLUMN email text")
        conn.execute(SQLX_DDL)
        for name in sorted(SQLX_FOLDER)[:2]:
            version, _, rest = name.partition("_")
            conn.execute("INSERT INTO _sqlx_migrations (version, description, success, "
                         "checksum, execution_time) VALUES (%s, %s, TRUE, %s, -1)",
                         [int(version), rest.removesuffix(".sql").replace("_", " "),
                          hashlib.sha384((folder / name).read_bytes()).digest()])
    refused = run_cli("migrate", "--status", "--dsn", db, "--dir", str(folder),
                      "--tool", "pgsteady")
    assert refused.returncode == 2, refused.stderr
    assert "public._sqlx_migrations holds sqlx's history (2 rows)" in refused.stderr
    assert "pass --tool sqlx" in refused.stderr
    status = run_cli("migrate", "--status", "--dsn", db, "--dir", str(folder), "--tool", "sqlx")
    assert status.returncode == 0, status.stdout + status.stderr
    assert [line.split()[1] for line in status.stdout.splitlines()[1:4]] == [
        "applied", "applied", "pending"]
    done = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--tool", "sqlx")
    assert done.returncode == 0, done.stderr
    assert columns(db, "users_email") == ["email"]


def test_pop_templates_are_named_as_templates_not_bad_sql(tmp_path, db):
    """A pop folder whose SQL files are Go templates ({{ index .Options "Namespace" }}, as
    supabase/auth's) is refused as templates pgsteady does not render (exit 2, file:line),
    not as 'syntax error at or near "{" ... fix the SQL'; nothing runs."""
    folder = write_migrations(tmp_path / "m", {
        "20200101000000_init.up.sql":
            'CREATE TABLE IF NOT EXISTS {{ index .Options "Namespace" }}.users (id int);\n',
        "20200101000000_init.down.sql": 'DROP TABLE {{ index .Options "Namespace" }}.users;\n',
    })
    for args in (["migrate", "--status"], ["migrate"]):
        done = run_cli(*args, "--dsn", db, "--dir", str(folder))
        assert done.returncode == 2, (args, done.stderr)
        assert "20200101000000_init.up.sql:1: a template" in done.stderr
        assert "fix the SQL" not in done.stderr and "Traceback" not in done.stderr
    assert _tables(db) == []
