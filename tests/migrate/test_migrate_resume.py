"""Issue 39 item 11: a no-transaction file the runner finishes by itself says truly what it
does, and one it cannot safely finish is refused as unfinished, as the docs say."""

from __future__ import annotations

import logging

import psycopg
from migrate_helpers import FAST, columns, run_cli, write_migrations

from pgsteady.migrate import apply, source

GOOSE = {"001_t.sql": "-- +goose Up\nCREATE TABLE t (a int);\n"}
STEPS = {"002_steps.sql": "-- +goose NO TRANSACTION\n-- +goose Up\n"
                          "CREATE INDEX CONCURRENTLY t_a ON t (a);\n"
                          "CREATE TABLE steps (n int);\n"}


def test_resumed_stepwise_file_says_it_goes_on(tmp_path, db, caplog):
    """A goose NO TRANSACTION file whose index an earlier run built: the log says the build
    is skipped and the file's next statement runs (not "recording the migration"), and it
    does run."""
    folder = write_migrations(tmp_path / "m", GOOSE)
    apply.migrate(db, source.load_dir(folder), FAST)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CREATE INDEX CONCURRENTLY t_a ON t (a)")  # the earlier run's build
    write_migrations(folder, STEPS)
    with caplog.at_level(logging.WARNING, logger="pgsteady.migrate"):
        apply.migrate(db, source.load_dir(folder), FAST)
    assert "index public.t_a already exists and is valid (an earlier build finished); not " \
           "building it again, going on with the file's next statement" in caplog.text
    assert "recording the migration" not in caplog.text
    assert columns(db, "steps") == ["n"]


def _flyway(tmp_path, db, script):
    """A Flyway folder whose V1 is applied and whose V1.1 Flyway left failed (success =
    false: a non-transactional script that did not finish)."""
    folder = write_migrations(tmp_path / "flyway", {"V1__create.sql": "CREATE TABLE t (a int);\n"
                                                     "CREATE TYPE mood AS ENUM ('ok');\n"})
    assert run_cli("migrate", "--dsn", db, "--dir", str(folder)).returncode == 0
    write_migrations(folder, {"V1_1__more.sql": script})
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("INSERT INTO flyway_schema_history VALUES (2, '1.1', 'more', 'SQL', "
                     "'V1_1__more.sql', 0, 'test', now(), 3, false)")
    return folder


def test_started_index_builds_are_finished_by_the_next_run(tmp_path, db):
    """A started file of named concurrent builds only: --status says pending, migrate
    finishes it (each build is safe to redo: kept if valid, else dropped and rebuilt)."""
    folder = _flyway(tmp_path, db, "CREATE INDEX CONCURRENTLY t_a ON t (a);\n"
                                   "CREATE INDEX CONCURRENTLY t_a2 ON t ((a * 2));\n")
    status = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--status")
    assert "1.1  pending" in status.stdout, status.stdout
    done = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert done.returncode == 0, done.stderr


def test_started_file_with_more_than_index_builds_is_refused(tmp_path, db):
    """A started no-transaction file whose other statements may have taken effect (an enum
    value, not safe to add twice) is unfinished, as the docs say: refused, exit 1, nothing run
    again (it was shown pending and rerun because its first statement was an index build)."""
    folder = _flyway(tmp_path, db, "CREATE INDEX CONCURRENTLY t_a ON t (a);\n"
                                   "ALTER TYPE mood ADD VALUE 'sad';\n")
    status = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--status")
    assert "1.1  unfinished" in status.stdout, status.stdout
    refused = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert refused.returncode == 1, refused.stderr
    assert "V1_1__more.sql: unfinished" in refused.stderr
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT to_regclass('t_a')").fetchone()[0] is None
