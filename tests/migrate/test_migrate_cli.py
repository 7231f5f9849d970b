"""The command line: documented exit codes, --plan, --json, and no secrets in output."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
import time

import psycopg
import pytest
from migrate_helpers import PGSTEADY, columns, history, run_cli, write_migrations

NEW = {
    "0002_add_flag.sql": "ALTER TABLE orgs ADD COLUMN flag boolean;\n",
    "0003_index.sql": "-- pgsteady: no-transaction\n"
                      "CREATE INDEX CONCURRENTLY orgs_flag ON orgs (flag);\n",
}


def test_plan_lists_locks_and_applies_nothing(tmp_path, db, orgs_dir):
    """--plan prints each pending statement's lock and table, exits 0, changes nothing."""
    write_migrations(orgs_dir, NEW)
    result = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir), "--plan")
    assert result.returncode == 0, result.stderr
    assert "2 pending migration(s); nothing applied" in result.stdout
    assert "line 1: ALTER TABLE ... ADD COLUMN: ACCESS EXCLUSIVE on orgs" in result.stdout
    assert "(no transaction)" in result.stdout
    assert "line 2: CREATE INDEX CONCURRENTLY: SHARE UPDATE EXCLUSIVE on orgs" in result.stdout
    assert "0001" not in result.stdout  # already applied
    assert columns(db, "orgs") == ["id", "name"]
    assert history(db) == [1]


def test_plan_json(tmp_path, db, orgs_dir):
    """--plan --json carries schema_version and each statement's targets."""
    write_migrations(orgs_dir, NEW)
    result = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir), "--plan", "--json")
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1
    assert [p["version"] for p in data["plan"]] == [2, 3]
    assert data["plan"][0]["statements"][0]["targets"] == [
        {"schema": None, "name": "orgs", "lock": "ACCESS EXCLUSIVE"}]
    assert data["plan"][1]["transactional"] is False


def test_migrate_json_and_exit_0(tmp_path, db, orgs_dir):
    """migrate --json reports what it applied; exit 0; a second run applies nothing."""
    write_migrations(orgs_dir, NEW)
    result = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1 and data["error"] is None
    assert [(a["version"], a["tries"]) for a in data["applied"]] == [(2, 1), (3, 1)]
    again = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir))
    assert again.returncode == 0
    assert "nothing to apply" in again.stdout


def test_preflight_ok_and_json(tmp_path, db, orgs_dir):
    """preflight exits 0 with nothing in the way; --json lists pending and no blockers."""
    write_migrations(orgs_dir, NEW)
    result = run_cli("preflight", "--dsn", db, "--dir", str(orgs_dir), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data == {"schema_version": 1, "ok": True, "blockers": [], "unknown": [], "pending": [
        {"version": 2, "name": "add_flag", "file": str(orgs_dir / "0002_add_flag.sql")},
        {"version": 3, "name": "index", "file": str(orgs_dir / "0003_index.sql")}]}


def test_preflight_json_names_blocker(tmp_path, db, orgs_dir, pgsteady_lock_holder):
    """preflight --json exits 1 and gives the blocker's pid, label, state, ages and lock."""
    write_migrations(orgs_dir, NEW)
    holder = pgsteady_lock_holder(db, "orgs", select=True, application_name="dashboard-logs")
    result = run_cli("preflight", "--dsn", db, "--dir", str(orgs_dir), "--json",
                     "--blocker-age", "0")
    assert result.returncode == 1
    [blocker] = json.loads(result.stdout)["blockers"]
    assert blocker["pid"] == holder.pid
    assert blocker["application_name"] == "dashboard-logs"
    assert blocker["state"] == "idle in transaction"
    assert blocker["lock_mode"] == "AccessShareLock"
    assert blocker["relation"] == "public.orgs"
    assert blocker["query"].startswith("SELECT count(*) FROM")
    assert blocker["needed_by"]["lock"] == "ACCESS EXCLUSIVE"


def test_cannot_connect_is_exit_3_without_password(tmp_path):
    """No server at the address: exit 3, one line, the password replaced by ***."""
    folder = write_migrations(tmp_path / "m", NEW)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for verb in ("migrate", "preflight"):
        result = run_cli(verb, "--dsn", f"postgresql://app:s3cret-pw@127.0.0.1:{port}/x",
                         "--dir", str(folder))
        assert result.returncode == 3, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert "s3cret-pw" not in result.stderr + result.stdout
        assert "cannot connect" in result.stderr


def test_usage_errors_are_exit_2(tmp_path):
    """A malformed option value is a usage error (exit 2) naming the option."""
    result = run_cli("migrate", "--lock-timeout", "soon", "--dir", str(tmp_path))
    assert result.returncode == 2
    assert "--lock-timeout" in result.stderr and "50ms" in result.stderr
    result = run_cli("migrate", "--lock-timeout", "0", "--dir", str(tmp_path))
    assert result.returncode == 2
    assert "lock_timeout must be above 0" in result.stderr


def test_migrate_json_on_failure_and_dsn_from_env(tmp_path, db, orgs_dir, pgsteady_lock_holder):
    """Blocked migrate --json (DSN from PGSTEADY_DSN): exit 1, error in JSON, tries on stderr."""
    write_migrations(orgs_dir, NEW)
    holder = pgsteady_lock_holder(db, "orgs", select=True, application_name="dashboard-logs")
    result = subprocess.run(
        [*PGSTEADY, "migrate", "--dir", str(orgs_dir), "--json", "--no-preflight",
         "--retry-budget", "800ms", "--lock-timeout", "200ms"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PGSTEADY_DSN": db})
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1 and data["applied"] == []
    assert "could not get its locks" in data["error"]
    assert f"pid {holder.pid} 'dashboard-logs'" in data["error"]
    assert "try 1 could not get its locks" in result.stderr
    assert "its query: SELECT count(*) FROM" in result.stderr
    assert history(db) == [1]


def test_preflight_names_sessions_waiting_in_the_queue(tmp_path, db, orgs_dir,
                                                       pgsteady_lock_holder):
    """A session already queued for a conflicting lock is named as 'waits for'."""
    write_migrations(orgs_dir, NEW)
    pgsteady_lock_holder(db, "orgs", select=True, application_name="dashboard-logs")
    queued = psycopg.connect(db, application_name="other-deploy", autocommit=True)
    queued.execute("SET lock_timeout = '3s'")

    def run_queued():
        with contextlib.suppress(psycopg.errors.LockNotAvailable):
            queued.execute("ALTER TABLE orgs ADD COLUMN x int")

    thread = threading.Thread(target=run_queued, daemon=True)
    thread.start()
    try:
        time.sleep(0.3)
        result = run_cli("preflight", "--dsn", db, "--dir", str(orgs_dir), "--json",
                         "--blocker-age", "100ms")
        assert result.returncode == 1
        found = {(b["application_name"], b["reason"], b["lock_mode"])
                 for b in json.loads(result.stdout)["blockers"]}
        assert ("dashboard-logs", "holds", "AccessShareLock") in found
        assert ("other-deploy", "waits for", "AccessExclusiveLock") in found
    finally:
        thread.join(5)
        queued.close()


def test_plan_says_kinds_in_sql_words_and_foreign_key_reach(tmp_path, db, orgs_dir):
    """--plan names kinds as SQL (CREATE VIEW, CREATE TABLE AS), and the FK's other table."""
    write_migrations(orgs_dir, {"0002_more.sql": """
        CREATE TABLE members (id int PRIMARY KEY, org_id int CONSTRAINT members_org_fkey
                              REFERENCES orgs);
        CREATE VIEW org_names AS SELECT name FROM orgs;
        CREATE TABLE org_copy AS SELECT * FROM orgs;
        ALTER TABLE members DROP CONSTRAINT members_org_fkey;
    """})
    result = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir), "--plan")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "line 3: CREATE VIEW: ACCESS SHARE on orgs" in out
    assert "line 4: CREATE TABLE AS: ACCESS SHARE on orgs" in out
    assert ("line 5: ALTER TABLE ... DROP CONSTRAINT: ACCESS EXCLUSIVE on members, ACCESS "
            "EXCLUSIVE on the tables members's foreign keys reference (constraint "
            "members_org_fkey)") in out
    for node_name in ("ViewStmt", "CreateTableAs", "View:", "CreateStmt"):
        assert node_name not in out


def test_a_bad_folder_is_named_first_even_when_the_server_is_unreachable(tmp_path):
    """migrate connects while it checks the folder; a bad file is still the error (exit 2),
    not the connection that was being opened meanwhile."""
    folder = write_migrations(tmp_path / "m", {"0001_bad.sql": "CREATE TABLE (;\n"})
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = run_cli("migrate", "--dsn", f"postgresql://app:pw@127.0.0.1:{port}/x",
                     "--dir", str(folder))
    assert result.returncode == 2, result.stderr
    assert "0001_bad.sql:1" in result.stderr and "cannot connect" not in result.stderr


def test_the_early_connection_is_closed_when_the_folder_is_refused(db):
    """EarlyConnection: take() hands over the session (or raises CannotConnect), discard()
    closes it, so a refused folder leaves no session behind in a long-lived caller."""
    from pgsteady.errors import CannotConnect
    from pgsteady.migrate import apply

    def ours(conn: psycopg.Connection) -> int:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name "
                            "LIKE 'pgsteady-migrate@%' AND pid <> pg_backend_pid()").fetchone()[0]

    with psycopg.connect(db, autocommit=True) as watcher:
        early = apply.EarlyConnection(db)
        conn = early.take()
        assert conn.execute("SELECT 1").fetchone() == (1,) and ours(watcher) == 1
        conn.close()
        early = apply.EarlyConnection(db)
        early.discard()
        deadline = time.monotonic() + 10
        while ours(watcher) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ours(watcher) == 0
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(CannotConnect):
        apply.EarlyConnection(f"host=127.0.0.1 port={port} dbname=x").take()


def test_a_layout_that_fits_no_file_is_one_line_naming_the_one_that_does(tmp_path):
    """--layout goose on a Flyway folder: one line, exit 2, before connecting; it names the
    layout the folder reads as (each skipped file used to be a line, then exit 1)."""
    folder = write_migrations(tmp_path / "m", {"V1__a.sql": "CREATE TABLE a (x int);\n",
                                               "V2__b.sql": "CREATE TABLE b (x int);\n"})
    for verb in (["migrate"], ["migrate", "--status"], ["preflight"]):
        result = run_cli(*verb, "--dsn", "postgresql://app:pw@127.0.0.1:1/x",
                         "--dir", str(folder), "--tool", "goose")
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "no file is a goose migration (2 skipped" in lines[0]
        assert "pass --tool flyway" in lines[0] and "pw" not in lines[0]
    # a layout that refuses a file (rather than skipping it) names the right one too
    result = run_cli("migrate", "--dsn", "postgresql://app:pw@127.0.0.1:1/x",
                     "--dir", str(folder), "--tool", "pgsteady")
    assert result.returncode == 2 and "V1__a.sql:1: the name must be" in result.stderr
    assert "(the folder reads as flyway: pass --tool flyway" in result.stderr
