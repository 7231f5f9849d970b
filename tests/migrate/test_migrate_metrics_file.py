"""`pgsteady migrate --metrics-file`: node_exporter's textfile, on success and on failure."""

from __future__ import annotations

import psycopg
from migrate_helpers import run_cli, write_migrations
from prometheus_client.parser import text_string_to_metric_families


def _read(path) -> dict[str, float]:
    return {s.name: s.value for family in text_string_to_metric_families(path.read_text())
            for s in family.samples}


def test_metrics_file_on_success_and_on_failure(tmp_path, db, orgs_dir):
    """A run that applies two migrations writes success 1, 2 tries, 0 pending; a run refused
    by a lock holder writes success 0 and 1 pending; no temporary file is left behind."""
    prom = tmp_path / "textfile" / "pgsteady_migrate.prom"
    prom.parent.mkdir()
    write_migrations(orgs_dir, {"0002_add_flag.sql": "ALTER TABLE orgs ADD COLUMN flag bool;",
                                "0003_add_note.sql": "ALTER TABLE orgs ADD COLUMN note text;"})
    done = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir), "--metrics-file", str(prom))
    assert done.returncode == 0, done.stderr
    ok = _read(prom)
    assert ok["pgsteady_migration_last_run_success"] == 1
    assert ok["pgsteady_migration_last_run_tries"] == 2
    assert ok["pgsteady_migration_last_run_pending"] == 0
    assert 0 < ok["pgsteady_migration_last_run_duration_seconds"] < 30

    write_migrations(orgs_dir, {"0004_add_size.sql": "ALTER TABLE orgs ADD COLUMN size int;"})
    with psycopg.connect(db, application_name="report@box:1") as holder:
        holder.execute("SELECT count(*) FROM orgs")  # a transaction left open on orgs
        failed = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir), "--metrics-file",
                         str(prom), "--no-preflight", "--retries", "1", "--lock-timeout",
                         "100ms", "--retry-budget", "1s")
    assert failed.returncode == 1, failed.stderr
    bad = _read(prom)
    assert bad["pgsteady_migration_last_run_success"] == 0
    assert bad["pgsteady_migration_last_run_pending"] == 1
    assert [p.name for p in prom.parent.iterdir()] == [prom.name]


def test_metrics_file_in_a_missing_folder_is_a_usage_error(tmp_path, db, orgs_dir):
    """A --metrics-file whose folder does not exist is refused before anything runs."""
    done = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir), "--metrics-file",
                   str(tmp_path / "nowhere" / "m.prom"))
    assert done.returncode == 2
    assert "--metrics-file" in done.stderr and len(done.stderr.strip().splitlines()) == 1
