"""A ``flyway_schema_history`` that Flyway itself wrote, read and extended as Flyway reads it.

Flyway keeps a version as the file writes it (``V001__a.sql`` is ``'001'``, ``V1_1`` is
``'1.1'``) and compares versions as numbers with trailing zeros ignored (``MigrationVersion``:
``001`` = ``1`` = ``1.0``). The rows here are laid out as Flyway lays them out: its DDL, the
schema-creation marker, repeatable rows without a version, CRC32 checksums over lines.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import psycopg
import pytest
from migrate_helpers import run_cli, write_migrations

from pgsteady.tools import flyway
from pgsteady.tools import registry as layouts
from pgsteady.tools.registry import LayoutError

FLYWAY_DDL = """
CREATE TABLE "public"."flyway_schema_history" (
    "installed_rank" INT NOT NULL,
    "version" VARCHAR(50),
    "description" VARCHAR(200) NOT NULL,
    "type" VARCHAR(20) NOT NULL,
    "script" VARCHAR(1000) NOT NULL,
    "checksum" INTEGER,
    "installed_by" VARCHAR(100) NOT NULL,
    "installed_on" TIMESTAMP NOT NULL DEFAULT now(),
    "execution_time" INTEGER NOT NULL,
    "success" BOOLEAN NOT NULL
);
ALTER TABLE "public"."flyway_schema_history" ADD CONSTRAINT "flyway_schema_history_pk"
    PRIMARY KEY ("installed_rank");
CREATE INDEX "flyway_schema_history_s_idx" ON "public"."flyway_schema_history" ("success");
"""

FILES = {
    "V001__a.sql": "CREATE TABLE a (id int);\n",
    "V1_1__b.sql": "CREATE TABLE b (id int);\n",
    "V2024.01.15__c.sql": "CREATE TABLE c (id int);\n",
    "R__views.sql": "CREATE OR REPLACE VIEW v AS SELECT 1 AS one;\n",
}


def crc(text: str) -> int:
    """Flyway's checksum: CRC32 over the lines without their line breaks, signed 32-bit."""
    value = 0
    for line in text.splitlines():
        value = zlib.crc32(line.encode(), value)
    return value - 2**32 if value >= 2**31 else value


def flyway_applied(dsn: str, folder: Path, rows: list[tuple[str | None, str, str, str]]) -> None:
    """Each (version, description, type, script) run and recorded as Flyway records it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(FLYWAY_DDL)
        conn.execute("INSERT INTO flyway_schema_history VALUES (0, NULL, "
                     "'<< Flyway Schema Creation >>', 'SCHEMA', '\"public\"', NULL, 'flyway', "
                     "now(), 0, true)")
        for rank, (version, description, kind, script) in enumerate(rows, start=1):
            text = (folder / script).read_text() if (folder / script).exists() else ""
            if kind == "SQL" and text:
                conn.execute(text)
            conn.execute("INSERT INTO flyway_schema_history VALUES (%s, %s, %s, %s, %s, %s, "
                         "'flyway', now(), 7, true)",
                         [rank, version, description, kind, script,
                          crc(text) if text else None])


def history(dsn: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT installed_rank, version, description, type, script, "
                            "checksum, success FROM flyway_schema_history "
                            "ORDER BY installed_rank").fetchall()


WRITTEN_BY_FLYWAY = [("001", "a", "SQL", "V001__a.sql"), ("1.1", "b", "SQL", "V1_1__b.sql"),
                     ("2024.01.15", "c", "SQL", "V2024.01.15__c.sql"),
                     (None, "views", "SQL", "R__views.sql")]


def test_a_history_flyway_wrote_shows_applied_and_migrate_applies_nothing(tmp_path, db):
    """Rows '001', '1.1', '2024.01.15' and the repeatable's (the schema marker is none) are
    the files' own: --status says applied with nothing pending or missing, migrate runs
    nothing."""
    folder = write_migrations(tmp_path / "sql", FILES)
    flyway_applied(db, folder, WRITTEN_BY_FLYWAY)
    before = history(db)
    shown = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--status")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    states = [line.split()[:2] for line in shown.stdout.splitlines()[1:]]
    assert states == [["001", "applied"], ["1.1", "applied"], ["2024.01.15", "applied"],
                      ["R__views", "applied"]]
    ran = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert ran.returncode == 0, ran.stderr  # V001 again would fail: table a exists
    assert history(db) == before


def test_new_rows_are_written_as_flyway_writes_them(tmp_path, db):
    """A new file's row holds the version as the file writes it (leading zeros and all), the
    next installed_rank, Flyway's description, script and CRC32 checksum, so Flyway reads the
    folder as migrated."""
    folder = write_migrations(tmp_path / "sql", FILES)
    flyway_applied(db, folder, WRITTEN_BY_FLYWAY)
    write_migrations(folder, {"V2024.02.01_01__add_d.sql": "CREATE TABLE d (id int);\n"})
    ran = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert ran.returncode == 0, ran.stderr
    assert history(db)[-1] == (5, "2024.02.01.01", "add d", "SQL", "V2024.02.01_01__add_d.sql",
                               crc("CREATE TABLE d (id int);\n"), True)
    again = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--status")
    assert again.returncode == 0 and "pending" not in again.stdout, again.stdout


def test_versions_compare_as_flyway_compares_them(tmp_path, db):
    """A row '1.0' is the file V001__a.sql's (trailing and leading zeros do not count);
    --accept of that file after an edit updates the row Flyway wrote, as its text stands."""
    folder = write_migrations(tmp_path / "sql", {"V001__a.sql": FILES["V001__a.sql"]})
    flyway_applied(db, folder, [("1.0", "a", "SQL", "V001__a.sql")])
    shown = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--status")
    assert shown.returncode == 0 and "applied" in shown.stdout, shown.stdout
    (folder / "V001__a.sql").write_text("CREATE TABLE a (id int);\n-- edited\n")
    accepted = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--accept", "1")
    assert accepted.returncode == 0, accepted.stderr
    assert history(db)[-1][1] == "1.0"
    assert history(db)[-1][5] == crc("CREATE TABLE a (id int);\n-- edited\n")


def test_accept_refuses_to_delete_a_row_a_file_matches(tmp_path, db):
    """--accept 001 with V001__a.sql in the folder used to delete Flyway's row and rerun the
    file; now it refuses in one line naming the file, and the row stays."""
    folder = write_migrations(tmp_path / "sql", FILES)
    flyway_applied(db, folder, WRITTEN_BY_FLYWAY)
    before = history(db)
    refused = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--accept", "001")
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr, refused.stderr
    (line,) = [x for x in refused.stderr.splitlines() if "skipped" not in x]  # R__views.sql
    assert "V001__a.sql matches its row" in line, line
    assert history(db) == before


def test_a_version_flyway_repair_marked_deleted_is_not_missing(tmp_path, db):
    """A successful DELETE row (what `flyway repair` writes for a file that is gone) cancels
    its version's row, as Flyway reads it: not 'missing', and migrate goes on."""
    folder = write_migrations(tmp_path / "sql", {"V001__a.sql": FILES["V001__a.sql"],
                                                 "V2__gone.sql": "SELECT 1;\n"})
    flyway_applied(db, folder, [("001", "a", "SQL", "V001__a.sql"),
                                ("2", "gone", "SQL", "V2__gone.sql"),
                                ("2", "gone", "DELETE", "V2__gone.sql")])
    (folder / "V2__gone.sql").unlink()
    shown = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--status")
    assert shown.returncode == 0 and "missing" not in shown.stdout, shown.stdout


def test_flyway_file_versions_keep_their_text_and_compare_as_numbers(tmp_path):
    """V001 is '001' ordered as 1, V2024.01.15 is '2024.01.15', 1.10 sorts after 1.9; two
    files of one Flyway version (V1 and V1.0) are refused, as Flyway refuses them."""
    write_migrations(tmp_path, {"V001__a.sql": "SELECT 1;", "V1_9__b.sql": "SELECT 1;",
                                "V1.10__c.sql": "SELECT 1;", "V2024.01.15__d.sql": "SELECT 1;"})
    scan = layouts.scan(tmp_path, "flyway")
    assert [(f.tag, f.order) for f in scan.files] == [
        ("001", (1,)), ("1.9", (1, 9)), ("1.10", (1, 10)), ("2024.01.15", (2024, 1, 15))]
    assert flyway.flyway_order("1.0") == flyway.flyway_order("001") == (1,)
    assert flyway.flyway_order("1.2-beta") is None
    write_migrations(tmp_path, {"V1.0__again.sql": "SELECT 1;"})
    with pytest.raises(LayoutError, match=r"version 1\.0 is also used by .*V001__a\.sql"):
        layouts.scan(tmp_path, "flyway")


def test_java_migration_rows_are_applied_not_missing(tmp_path, db):
    """Rows Flyway wrote for Java migrations (JDBC, SPRING_JDBC) have no SQL file: --status
    and migrate say applied and exit 0, and --accept refuses to delete such a row (Flyway
    would no longer start without it)."""
    folder = write_migrations(tmp_path / "sql", {"V1__a.sql": FILES["V001__a.sql"],
                                                 "V4__d.sql": "CREATE TABLE d (id int);\n"})
    flyway_applied(db, folder, [("1", "a", "SQL", "V1__a.sql"),
                                ("2", "Backfill", "JDBC", "db.migration.V2__Backfill"),
                                ("3", "Seed", "SPRING_JDBC", "db.migration.V3__Seed")])
    shown = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--status")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    states = {line.split()[0]: line.split()[1] for line in shown.stdout.splitlines()[1:5]}
    assert states == {"1": "applied", "2": "applied", "3": "applied", "4": "pending"}
    assert "a JDBC migration: Flyway ran its code" in shown.stdout
    ran = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert ran.returncode == 0, ran.stderr
    before = history(db)
    refused = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--accept", "2")
    assert refused.returncode == 2 and "nothing to accept" in refused.stderr, refused.stderr
    assert history(db) == before


def _view(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT pg_get_viewdef('v'::regclass)").fetchone()[0]


def test_repeatable_scripts_run_as_flyway_runs_them(tmp_path, db):
    """R__ scripts run after the versioned ones and are recorded as Flyway records them
    (version NULL, type SQL, CRC32, the next installed_rank); unchanged, they do not run
    again; edited, they run again (a new row) and are never called up to date before."""
    folder = write_migrations(tmp_path / "sql", {
        "R__views.sql": "CREATE OR REPLACE VIEW v AS SELECT id FROM a;\n",
        "V1__a.sql": "CREATE TABLE a (id int);\n"})
    ran = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert ran.returncode == 0, ran.stderr
    assert [r[1:] for r in history(db)] == [
        ("1", "a", "SQL", "V1__a.sql", crc("CREATE TABLE a (id int);\n"), True),
        (None, "views", "SQL", "R__views.sql",
         crc("CREATE OR REPLACE VIEW v AS SELECT id FROM a;\n"), True)]
    write_migrations(folder, {"V2__b.sql": "ALTER TABLE a ADD COLUMN b int;\n"})
    ran = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert ran.returncode == 0, ran.stderr
    assert [r[1] for r in history(db)] == ["1", None, "2"]  # the view did not run again
    edited = "CREATE OR REPLACE VIEW v AS SELECT id, b FROM a;\n"
    write_migrations(folder, {"R__views.sql": edited})
    shown = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--status")
    assert shown.returncode == 0, shown.stderr
    assert [line.split()[:2] for line in shown.stdout.splitlines()
            if "R__views" in line] == [["R__views", "pending"]], shown.stdout
    ran = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert ran.returncode == 0 and "nothing to apply" not in ran.stdout, ran.stdout
    assert history(db)[-1][1:] == (None, "views", "SQL", "R__views.sql", crc(edited), True)
    assert history(db)[-1][0] == 4
    assert "b" in _view(db)
    again = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert again.returncode == 0 and "nothing to apply" in again.stdout, again.stdout
