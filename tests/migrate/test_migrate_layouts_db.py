"""Each tool's folder applied by migrate and checked by preflight against that tool's table.

The test sets the database up as the tool itself would have left it (its history table with
the first migration applied, in the tool's own DDL), then pgsteady takes over.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from pathlib import Path

import psycopg
import pytest
from migrate_helpers import columns, run_cli

CREATE = "CREATE TABLE t (id int PRIMARY KEY, a text);\n"
ADD = "ALTER TABLE t ADD COLUMN b int;\n"
INDEX = "CREATE INDEX CONCURRENTLY t_b ON t (b);\n"

FOLDERS: dict[str, dict[str, str]] = {
    "pgsteady": {"0001_create.sql": CREATE, "0002_add.sql": ADD,
                 "0003_idx.sql": "-- pgsteady: no-transaction\n" + INDEX},
    "goose": {
        "20240101000001_create.sql": f"-- +goose Up\n{CREATE}-- +goose Down\nDROP TABLE t;\n",
        "20240101000002_add.sql": f"-- +goose Up\n-- +goose StatementBegin\n{ADD}"
                                  f"-- +goose StatementEnd\n\n-- +goose Down\n"
                                  f"ALTER TABLE t DROP COLUMN b;\n",
        "20240101000003_idx.sql": f"-- +goose NO TRANSACTION\n-- +goose Up\n{INDEX}"
                                  f"-- +goose Down\nDROP INDEX t_b;\n"},
    "golang-migrate": {"1_create.up.sql": CREATE, "1_create.down.sql": "DROP TABLE t;\n",
                       "2_add.up.sql": f"BEGIN;\n{ADD}COMMIT;\n",
                       "2_add.down.sql": "ALTER TABLE t DROP COLUMN b;\n",
                       "3_idx.up.sql": INDEX, "3_idx.down.sql": "DROP INDEX t_b;\n"},
    "dbmate": {
        "20240101000001_create.sql": f"-- migrate:up\n{CREATE}\n-- migrate:down\nDROP TABLE t;\n",
        # its own BEGIN/COMMIT inside dbmate's transaction: dropped, the file is one
        "20240101000002_add.sql": f"-- migrate:up\nSELECT 1;\nBEGIN;\n{ADD}COMMIT;\n"
                                  f"-- migrate:down\n",
        "20240101000003_idx.sql": f"-- migrate:up transaction:false\n{INDEX}\n"
                                  f"-- migrate:down\nDROP INDEX t_b;\n"},
    # no executeInTransaction: Flyway sees the CONCURRENTLY statements and runs V2 without a
    # transaction, statement by statement
    "flyway": {"V1__create.sql": CREATE, "V1_1__add.sql": f"BEGIN;\n{ADD}COMMIT;\nSELECT 1;\n",
               "V2__idx.sql": f"{INDEX}CREATE INDEX CONCURRENTLY t_a ON t (a);\n"},
    "prisma": {"migration_lock.toml": 'provider = "postgresql"\n',
               "20240101000001_create/migration.sql": CREATE,
               "20240101000002_add/migration.sql": ADD,
               "20240101000003_idx/migration.sql": INDEX},
    "diesel": {"2024-01-01-000001_create/up.sql": CREATE,
               "2024-01-01-000001_create/down.sql": "DROP TABLE t;\n",
               "2024-01-01-000002_add/up.sql": ADD,
               "2024-01-01-000002_add/down.sql": "ALTER TABLE t DROP COLUMN b;\n",
               "2024-01-01-000003_idx/up.sql": INDEX,
               "2024-01-01-000003_idx/metadata.toml": "run_in_transaction = false\n"},
    "sql-migrate": {
        "1_create.sql": f"-- +migrate Up\n{CREATE}\n-- +migrate Down\nDROP TABLE t;\n",
        "2_add.sql": f"-- +migrate Up\n{ADD}-- +migrate Down\nALTER TABLE t DROP COLUMN b;\n",
        "10_idx.sql": f"-- +migrate Up notransaction\n{INDEX}-- +migrate Down\n"
                      f"DROP INDEX t_b;\n"},
    "tern": {
        "001_create.sql": f"{CREATE}\n---- create above / drop below ----\n\nDROP TABLE t;\n",
        "002_add.sql": ADD,
        "003_idx.sql": f"---- tern: disable-tx ----\n{INDEX}"
                       f"CREATE INDEX CONCURRENTLY t_a ON t (a);\n"  # tern splits, one by one
                       f"---- create above / drop below ----\nDROP INDEX t_b;\n"},
}
PENDING = {"pgsteady": [2, 3], "goose": [20240101000002, 20240101000003],
           "golang-migrate": [2, 3], "dbmate": ["20240101000002", "20240101000003"],
           "flyway": ["1.1", "2"],
           "prisma": ["20240101000002_add", "20240101000003_idx"],
           "diesel": ["20240101000002", "20240101000003"],
           "sql-migrate": ["2_add.sql", "10_idx.sql"], "tern": [2, 3]}


def _flyway_checksum(text: str) -> int:
    crc = 0
    for line in text.splitlines():
        crc = zlib.crc32(line.encode(), crc)
    return crc - 2**32 if crc >= 2**31 else crc


def _as_the_tool_left_it(conn: psycopg.Connection, tool: str, folder: Path) -> None:
    """The first migration applied and recorded by the tool itself (its own DDL and rows)."""
    conn.execute(CREATE)
    if tool == "pgsteady":
        conn.execute("""CREATE TABLE pgsteady_migrations (version bigint PRIMARY KEY,
            name text NOT NULL, checksum text NOT NULL, applied_at timestamptz NOT NULL
            DEFAULT now(), duration_ms integer NOT NULL, tries integer NOT NULL,
            applied_by text NOT NULL)""")  # a table from before the `finished` column
        digest = hashlib.sha256((folder / "0001_create.sql").read_bytes()).hexdigest()
        conn.execute("INSERT INTO pgsteady_migrations VALUES (1, 'create', %s, now(), 1, 1, "
                     "'test')", [digest])
    elif tool == "goose":  # goose v2's DDL
        conn.execute("""CREATE TABLE goose_db_version (id serial NOT NULL,
            version_id bigint NOT NULL, is_applied boolean NOT NULL,
            tstamp timestamp NULL default now(), PRIMARY KEY(id))""")
        conn.execute("INSERT INTO goose_db_version (version_id, is_applied) "
                     "VALUES (0, true), (20240101000001, true)")
    elif tool == "golang-migrate":
        conn.execute("CREATE TABLE schema_migrations (version bigint not null primary key, "
                     "dirty boolean not null)")
        conn.execute("INSERT INTO schema_migrations VALUES (1, false)")
    elif tool == "dbmate":
        conn.execute("CREATE TABLE schema_migrations (version varchar(128) primary key)")
        conn.execute("INSERT INTO schema_migrations VALUES ('20240101000001')")
    elif tool == "flyway":
        conn.execute("""CREATE TABLE flyway_schema_history (installed_rank INT NOT NULL,
            version VARCHAR(50), description VARCHAR(200) NOT NULL, type VARCHAR(20) NOT NULL,
            script VARCHAR(1000) NOT NULL, checksum INTEGER, installed_by VARCHAR(100) NOT NULL,
            installed_on TIMESTAMP NOT NULL DEFAULT now(), execution_time INTEGER NOT NULL,
            success BOOLEAN NOT NULL, CONSTRAINT flyway_schema_history_pk
            PRIMARY KEY (installed_rank))""")
        conn.execute("INSERT INTO flyway_schema_history VALUES (1, '1', 'create', 'SQL', "
                     "'V1__create.sql', %s, 'test', now(), 3, true)",
                     [_flyway_checksum((folder / "V1__create.sql").read_text())])
    elif tool == "prisma":
        conn.execute("""CREATE TABLE "_prisma_migrations" ("id" VARCHAR(36) PRIMARY KEY
            NOT NULL, "checksum" VARCHAR(64) NOT NULL, "finished_at" TIMESTAMPTZ,
            "migration_name" VARCHAR(255) NOT NULL, "logs" TEXT, "rolled_back_at" TIMESTAMPTZ,
            "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(),
            "applied_steps_count" INTEGER NOT NULL DEFAULT 0)""")
        digest = hashlib.sha256(
            (folder / "20240101000001_create/migration.sql").read_bytes()).hexdigest()
        conn.execute("INSERT INTO _prisma_migrations VALUES ('a', %s, now(), "
                     "'20240101000001_create', NULL, NULL, now(), 1)", [digest])
    elif tool == "sql-migrate":  # sql-migrate's own table (through gorp)
        conn.execute('CREATE TABLE IF NOT EXISTS "gorp_migrations" ("id" text not null '
                     'primary key, "applied_at" timestamp with time zone)')
        conn.execute("INSERT INTO gorp_migrations VALUES ('1_create.sql', now())")
    elif tool == "tern":  # tern's own version table, one row
        conn.execute("CREATE TABLE IF NOT EXISTS public.schema_version (version int4 not null)")
        conn.execute("INSERT INTO public.schema_version (version) VALUES (1)")
    elif tool == "diesel":  # diesel_migrations' own DDL
        conn.execute("""CREATE TABLE IF NOT EXISTS __diesel_schema_migrations (
            version VARCHAR(50) PRIMARY KEY NOT NULL,
            run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)""")
        conn.execute("INSERT INTO __diesel_schema_migrations (version) "
                     "VALUES ('20240101000001')")


def _as_the_tool_reads_it(conn: psycopg.Connection, tool: str) -> list:
    """The applied versions, read with the query the tool itself uses."""
    query = {
        "pgsteady": "SELECT version FROM pgsteady_migrations WHERE finished ORDER BY version",
        "goose": "SELECT version_id FROM goose_db_version WHERE is_applied ORDER BY id",
        "golang-migrate": "SELECT version, dirty FROM schema_migrations",
        "dbmate": "SELECT version FROM schema_migrations ORDER BY version",
        "flyway": "SELECT version, checksum FROM flyway_schema_history WHERE success "
                  "ORDER BY installed_rank",
        "prisma": "SELECT migration_name, checksum FROM _prisma_migrations WHERE finished_at "
                  "IS NOT NULL AND rolled_back_at IS NULL ORDER BY migration_name",
        "diesel": "SELECT version FROM __diesel_schema_migrations ORDER BY version DESC",
        "sql-migrate": "SELECT id FROM gorp_migrations ORDER BY applied_at, id",
        "tern": "SELECT version FROM public.schema_version",
    }[tool]
    return [tuple(r) if len(r) > 1 else r[0] for r in conn.execute(query).fetchall()]


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, body in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(body)
    return folder


@pytest.mark.parametrize("tool", list(FOLDERS))
def test_tool_folder_applied_and_checked_against_its_table(tmp_path, db, tool):
    """Preflight reads the tool's table (2 pending); migrate applies them and writes that
    table as the tool would; afterwards preflight finds nothing pending."""
    folder = _write(tmp_path / tool, FOLDERS[tool])
    with psycopg.connect(db, autocommit=True) as conn:
        _as_the_tool_left_it(conn, tool, folder)
    before = run_cli("preflight", "--dsn", db, "--dir", str(folder), "--json")
    assert before.returncode == 0, before.stderr
    assert [p["version"] for p in json.loads(before.stdout)["pending"]] == PENDING[tool]
    applied = run_cli("migrate", "--dsn", db, "--dir", str(folder))  # layout auto-detected
    assert applied.returncode == 0, applied.stderr
    # each version shown as --plan and preflight show it (Flyway's 1.1, not 1)
    assert [line.split()[1] for line in applied.stdout.splitlines()
            if line.startswith("applied ")] == [str(v) for v in PENDING[tool]]
    assert columns(db, "t") == ["id", "a", "b"]
    assert columns(db, "t_b") == ["b"]
    with psycopg.connect(db) as conn:
        rows = _as_the_tool_reads_it(conn, tool)
    expected = {
        "pgsteady": lambda: [1, 2, 3],
        "goose": lambda: [0, 20240101000001, 20240101000002, 20240101000003],
        "golang-migrate": lambda: [(3, False)],
        "dbmate": lambda: ["20240101000001", "20240101000002", "20240101000003"],
        "flyway": lambda: [(v, _flyway_checksum((folder / f).read_text())) for v, f in
                           (("1", "V1__create.sql"), ("1.1", "V1_1__add.sql"),
                            ("2", "V2__idx.sql"))],
        "prisma": lambda: [
            (n, hashlib.sha256((folder / n / "migration.sql").read_bytes()).hexdigest())
            for n in ("20240101000001_create", "20240101000002_add", "20240101000003_idx")],
        "diesel": lambda: ["20240101000003", "20240101000002", "20240101000001"],
        "sql-migrate": lambda: ["1_create.sql", "2_add.sql", "10_idx.sql"],
        "tern": lambda: [3],
    }[tool]()
    assert rows == expected
    after = run_cli("preflight", "--dsn", db, "--dir", str(folder), "--json",
                    "--tool", tool)
    assert json.loads(after.stdout)["pending"] == []


@pytest.mark.parametrize("tool", ["pgsteady", "goose", "diesel"])
def test_baseline_adopts_an_existing_database(tmp_path, db, tool):
    """--baseline V records every migration up to V without running it, then applies the rest."""
    folder = _write(tmp_path / tool, FOLDERS[tool])
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(CREATE + ADD)  # the schema exists; no history table at all
    # Diesel users name a version as its folder does, dashes and all
    version = "2024-01-01-000002" if tool == "diesel" else str(PENDING[tool][0])
    result = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--baseline", version)
    assert result.returncode == 0, result.stderr
    assert "recorded" in result.stderr and "without running it" in result.stderr
    assert columns(db, "t_b") == ["b"]  # the one after the baseline ran
    again = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert again.returncode == 0 and "nothing to apply" in again.stdout


def test_alembic_version_is_read(db):
    """alembic_version's heads read as applied versions; pgsteady never writes that table."""
    from pgsteady.errors import UsageError
    from pgsteady.migrate import history

    store = history.Store("alembic")
    with psycopg.connect(db, autocommit=True) as conn:
        assert store.applied(conn) == {}
        conn.execute("CREATE TABLE alembic_version (version_num varchar(32) NOT NULL "
                     "PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES ('ae1027a6acf'), ('27c6a30d7c24')")
        assert sorted(store.applied(conn)) == ["27c6a30d7c24", "ae1027a6acf"]
        with pytest.raises(UsageError, match="never writes it"):
            store.ensure(conn)


def test_a_goose_no_transaction_file_of_several_statements_runs_in_steps(
        tmp_path, db, pgsteady_lock_holder):
    """goose runs a NO TRANSACTION file statement by statement, each committing on its own:
    so does migrate. A step waiting on a lock is retried without running the steps before it
    again; a failing step says the ones before it stay applied, and its version is not
    recorded until the file runs to its end."""
    import dataclasses
    import threading

    from migrate_helpers import FAST

    from pgsteady.errors import MigrationError
    from pgsteady.migrate import apply, source

    folder = _write(tmp_path / "goose", {
        "001_t.sql": "-- +goose Up\nCREATE TABLE t (a int, b int);\nCREATE TABLE steps (n int);\n",
        "002_idx.sql": "-- +goose NO TRANSACTION\n-- +goose Up\nINSERT INTO steps VALUES (1);\n"
                       "CREATE INDEX CONCURRENTLY IF NOT EXISTS t_a ON t (a);\n"
                       "CREATE INDEX CONCURRENTLY IF NOT EXISTS t_b ON t (nope);\n"
                       "-- +goose Down\nDROP INDEX t_a;\n"})
    with pytest.raises(MigrationError, match=r"002_idx.sql:5: CREATE INDEX CONCURRENTLY "
                                             r"failed: 42703.*\(statements 1-2 of 3 in this "
                                             r"file ran before it and stay applied, each on "
                                             r"its own as goose runs them"):
        apply.migrate(db, source.load_dir(folder), FAST)
    assert columns(db, "t_a") == ["a"]
    with psycopg.connect(db) as conn:
        assert _as_the_tool_reads_it(conn, "goose") == [0, 1]  # 2 not recorded
        conn.execute("DELETE FROM steps")
        conn.commit()
    (folder / "002_idx.sql").write_text((folder / "002_idx.sql").read_text()
                                        .replace("(nope)", "(b)"))
    holder = pgsteady_lock_holder(db, "t", "SHARE", application_name="steps-writer")
    threading.Timer(0.5, holder.release).start()  # the second step waits, the first does not
    done = apply.migrate(db, source.load_dir(folder), dataclasses.replace(FAST, retry_budget=5),
                         check_first=False)
    assert [(a.version, a.tries > 1) for a in done] == [(2, True)]
    assert columns(db, "t_b") == ["b"]
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM steps").fetchone()[0] == 1  # ran once
        assert _as_the_tool_reads_it(conn, "goose") == [0, 1, 2]


def test_empty_migrations_are_recorded_and_a_tern_version_without_a_file_is_named(tmp_path, db):
    """Other tools record a migration whose Up part is empty: so does migrate. A tern
    database ahead of its folder has its current version named as applied without a file,
    not taken for up to date."""
    from pgsteady.migrate import apply, history, source

    folder = _write(tmp_path / "goose", {
        "001_t.sql": "-- +goose Up\nCREATE TABLE t (a int);\n",
        "002_nothing.sql": "-- +goose Up\n-- nothing to do here\n-- +goose Down\nSELECT 1;\n",
        "003_u.sql": "-- +goose Up\nCREATE TABLE u (a int);\n"})
    done = apply.migrate(db, source.load_dir(folder), apply.Policy())
    assert [a.version for a in done] == [1, 2, 3]
    with psycopg.connect(db) as conn:
        assert _as_the_tool_reads_it(conn, "goose") == [0, 1, 2, 3]
    tern = _write(tmp_path / "tern", {"001_a.sql": "CREATE TABLE a (i int);\n"})
    with psycopg.connect(db, autocommit=True) as conn:
        # a database keeps one runner's history: goose's would make tern's run refused
        conn.execute("DROP TABLE goose_db_version")
        conn.execute("CREATE TABLE schema_version (version int4 NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (4)")
        applied = history.Store("tern").applied(conn, source.load_dir(tern))
    assert sorted(applied) == ["1", "4"]
    status = run_cli("migrate", "--dsn", db, "--dir", str(tern), "--status", "--tool", "tern")
    assert re.search(r"^\s*4\s+missing\s+\(applied, no file in the folder\)", status.stdout,
                     re.MULTILINE), status.stdout
    refused = run_cli("migrate", "--dsn", db, "--dir", str(tern), "--tool", "tern")
    assert refused.returncode != 0 and "nothing to apply" not in refused.stdout


def test_a_goose_go_migration_keeps_its_place_and_migrate_stops_before_it(tmp_path, db):
    """goose runs <version>_<name>.go migrations from code: migrate applies the SQL ones
    before a pending Go one, stops there naming it (a later file may need what it builds),
    and once goose has run it, goes on; an applied Go version is not 'missing'."""
    folder = _write(tmp_path / "goose", {
        "001_t.sql": "-- +goose Up\nCREATE TABLE t (a int);\n",
        "002_backfill.go": "package migrations\n",
        "003_b.sql": "-- +goose Up\nALTER TABLE t ADD COLUMN b int;\n",
        "migrations_test.go": "package migrations\n"})
    result = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert result.returncode == 1, result.stderr
    assert ("applied 1 migration(s), then stopped before 002_backfill.go: a Go migration, "
            "which goose runs itself") in result.stderr
    assert "goose up-to 2" in result.stderr and columns(db, "t") == ["a"]
    status = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--status")
    assert re.search(r"\b2\s.*pending", status.stdout), status.stdout
    checked = run_cli("preflight", "--dsn", db, "--dir", str(folder))
    assert "2 pending migration(s), no session in the way: 002_backfill.go, 003_b.sql" \
        in checked.stdout, checked.stdout
    assert "note: 002_backfill.go is a Go migration" in checked.stdout
    with psycopg.connect(db) as conn:  # goose runs the Go migration
        conn.execute("INSERT INTO goose_db_version (version_id, is_applied) VALUES (2, true)")
    result = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert result.returncode == 0, result.stderr
    assert columns(db, "t") == ["a", "b"]
    status = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--status")
    assert status.returncode == 0 and "missing" not in status.stdout, status.stdout


def test_accept_records_a_failed_flyway_row_as_applied(tmp_path, db):
    """A Flyway row with success = false (a failed non-transactional script) is 'unfinished';
    --accept marks it applied with the file's checksum, as `flyway repair` leaves it (it used
    to say 'accepted' and change nothing), and migrate then goes on."""
    folder = _write(tmp_path / "flyway", {"V1__create.sql": CREATE, "V1_1__add.sql": ADD})
    with psycopg.connect(db, autocommit=True) as conn:
        _as_the_tool_left_it(conn, "flyway", folder)
        conn.execute(ADD)
        conn.execute("INSERT INTO flyway_schema_history VALUES (2, '1.1', 'add', 'SQL', "
                     "'V1_1__add.sql', 0, 'test', now(), 3, false)")
    refused = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert refused.returncode == 1 and "unfinished" in refused.stderr, refused.stderr
    accepted = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--accept", "1.1")
    assert accepted.returncode == 0, accepted.stderr
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT success, checksum FROM flyway_schema_history "
                            "WHERE version = '1.1'").fetchone() == (
            True, _flyway_checksum((folder / "V1_1__add.sql").read_text()))
    again = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert again.returncode == 0 and "nothing to apply" in again.stderr + again.stdout


def test_a_prisma_migration_with_an_empty_name_is_applied_and_linted(tmp_path, db):
    """Prisma applies a folder named `<timestamp>_` (an empty migration name; real: typebot,
    cal.com): migrate applies and records it under that name, lint judges its file."""
    folder = _write(tmp_path / "prisma", {
        "migration_lock.toml": 'provider = "postgresql"\n',
        "20240101000001_init/migration.sql": CREATE,
        "20240101000002_/migration.sql": ADD})
    done = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert done.returncode == 0, done.stderr
    assert columns(db, "t") == ["id", "a", "b"]
    with psycopg.connect(db) as conn:
        assert [n for n, _ in _as_the_tool_reads_it(conn, "prisma")] == [
            "20240101000001_init", "20240101000002_"]
    linted = run_cli("lint", "--no-cache", "--format", "json", str(folder))
    paths = {Path(f["path"]).parent.name for f in json.loads(linted.stdout)["findings"]}
    assert "20240101000002_" in paths, linted.stdout
