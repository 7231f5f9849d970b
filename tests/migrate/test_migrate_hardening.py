"""Issue 9's migrate items: poolers, connect_timeout, secrets, kills mid-way, history schema."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time

import psycopg
import pytest
from migrate_helpers import FAST, PGSTEADY, columns, history, run_cli, write_migrations

from pgsteady.errors import MigrationBlocked
from pgsteady.migrate import apply, source


def test_transaction_pooler_is_refused(pgsteady_stack, pgsteady_database, tmp_path):
    """Through PgBouncer transaction mode: exit 2, one line; session mode works."""
    folder = write_migrations(tmp_path / "m", {"0001_a.sql": "CREATE TABLE a (id int);\n"})
    pooled = pgsteady_stack(pool_mode="transaction", pool_size=2) \
        .pooled_dsn(pgsteady_database.name)
    refused = run_cli("migrate", "--dsn", pooled, "--dir", str(folder))
    assert refused.returncode == 2, refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert "transaction pooler" in line and "session-mode pool" in line
    assert history(pgsteady_database.dsn) == []
    for verb in (["preflight"], ["migrate", "--status"], ["migrate", "--plan"]):
        also = run_cli(*verb, "--dsn", pooled, "--dir", str(folder))
        assert also.returncode == 2 and "transaction pooler" in also.stderr, verb
    session = pgsteady_stack(pool_mode="session", pool_size=2) \
        .pooled_dsn(pgsteady_database.name)
    done = run_cli("migrate", "--dsn", session, "--dir", str(folder))
    assert done.returncode == 0, done.stderr
    assert history(pgsteady_database.dsn) == [1]


@pytest.fixture
def silent_server():
    """A port that accepts TCP connections and never answers (a hung server)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


@pytest.mark.parametrize("how", ["key", "url", "env"])
def test_connect_timeout_is_the_users(tmp_path, silent_server, how):
    """connect_timeout from the DSN, the URL or PGCONNECT_TIMEOUT wins over the 10 s default."""
    folder = write_migrations(tmp_path / "m", {"0001_a.sql": "SELECT 1;\n"})
    env = {k: v for k, v in os.environ.items() if k != "PGCONNECT_TIMEOUT"}
    dsn = {"key": f"host=127.0.0.1 port={silent_server} dbname=x connect_timeout=2",
           "url": f"postgresql://u@127.0.0.1:{silent_server}/x?connect_timeout=2",
           "env": f"host=127.0.0.1 port={silent_server} dbname=x"}[how]
    if how == "env":
        env["PGCONNECT_TIMEOUT"] = "2"
    start = time.monotonic()
    result = subprocess.run([*PGSTEADY, "migrate", "--dsn", dsn, "--dir", str(folder)],
                            capture_output=True, text=True, timeout=60, env=env, check=False)
    took = time.monotonic() - start
    assert result.returncode == 3, result.stderr
    assert took < 8, f"took {took:.1f}s: the 10 s default was used"


def test_preflight_masks_password_literals_before_cutting(db, orgs_dir, tmp_path):
    """A blocker's ALTER ROLE ... PASSWORD E'...' / U&'...' never reaches preflight's output."""
    write_migrations(orgs_dir, {"0002_add.sql": "ALTER TABLE orgs ADD COLUMN flag int;\n"})
    with psycopg.connect(db, autocommit=True) as admin:
        admin.execute("CREATE ROLE leak_test_role")
    try:
        for literal, secret in ((r"E'sec\'ret1'", "sec"), ("U&'s\\0065cret2'", "cret2"),
                                ("$p$secret3$p$", "secret3"),
                                ("'" + "x" * 190 + "secret4'", "secret4")):
            with psycopg.connect(db) as holder:
                holder.execute("SELECT count(*) FROM orgs")
                holder.execute(f"ALTER ROLE leak_test_role PASSWORD {literal}")
                result = run_cli("preflight", "--dsn", db, "--dir", str(orgs_dir), "--json",
                                 "--blocker-age", "0")
                assert result.returncode == 1, result.stderr
                [blocker] = json.loads(result.stdout)["blockers"]
                assert "PASSWORD '***'" in blocker["query"]
                assert secret not in result.stdout + result.stderr
                text = run_cli("preflight", "--dsn", db, "--dir", str(orgs_dir),
                               "--blocker-age", "0")
                assert secret not in text.stdout + text.stderr
                holder.rollback()
    finally:
        with psycopg.connect(db, autocommit=True) as admin:
            admin.execute("DROP ROLE leak_test_role")


def test_killed_no_transaction_migration_is_named_unfinished(db, orgs_dir):
    """A no-transaction migration (not an index build) killed mid-way: the rerun names it
    unfinished (not an invalid index); --accept records it; then the rest applies."""
    write_migrations(orgs_dir, {"0002_vacuum.sql": "-- pgsteady: no-transaction\n"
                                                   "VACUUM orgs;\n"})
    with psycopg.connect(db) as holder, psycopg.connect(db, autocommit=True) as watcher:
        holder.execute("LOCK TABLE orgs IN SHARE UPDATE EXCLUSIVE MODE")
        run = subprocess.Popen([*PGSTEADY, "migrate", "--dsn", db, "--dir", str(orgs_dir),
                                "--no-preflight", "--lock-timeout", "20s",
                                "--first-lock-timeout", "20s"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:  # wait until VACUUM waits for the lock
                waiting = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'VACUUM orgs%' "
                    "AND wait_event_type = 'Lock'").fetchone()[0]
                if waiting:
                    break
                time.sleep(0.05)
            assert waiting, "the migration never started waiting"
            run.send_signal(signal.SIGKILL)
        finally:
            run.kill()
            run.communicate(timeout=10)
        holder.rollback()
    rerun = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir))
    assert rerun.returncode == 1, rerun.stderr
    assert "0002_vacuum.sql: unfinished" in rerun.stderr
    assert "invalid index" not in rerun.stderr.lower()
    assert run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir), "--accept", "2") \
        .returncode == 0
    write_migrations(orgs_dir, {"0003_add.sql": "ALTER TABLE orgs ADD COLUMN flag int;\n"})
    assert run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir)).returncode == 0
    assert history(db) == [1, 2, 3]


def test_concurrent_index_blocked_by_old_snapshot(db, orgs_dir, tmp_path):
    """A concurrent build waiting on an old snapshot names that session, and says an
    INVALID index was left (not "nothing applied")."""
    write_migrations(orgs_dir, {"0002_idx.sql": "-- pgsteady: no-transaction\n"
                                                "CREATE INDEX CONCURRENTLY orgs_name ON orgs "
                                                "(name);\n"})
    with psycopg.connect(db) as other:
        other.execute("CREATE TABLE elsewhere (id int)")
        other.commit()
        other.execute("SET application_name = 'old-snapshot-holder'")
        other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        other.execute("SELECT count(*) FROM elsewhere")  # a snapshot, no lock on orgs
        with pytest.raises(MigrationBlocked) as caught:
            apply.migrate(db, source.load_dir(orgs_dir), FAST, check_first=False)
        other.rollback()
    message = str(caught.value)
    assert "old-snapshot-holder" in message and "not identified" not in message
    assert "INVALID index public.orgs_name" in message
    assert "nothing of it was applied" not in message
    apply.migrate(db, source.load_dir(orgs_dir), FAST)  # dropped and built again
    assert history(db) == [1, 2]


def test_history_table_in_own_schema_for_a_non_owner(db, tmp_path):
    """A role without CREATE on public (PostgreSQL 15) migrates with --history-table."""
    with psycopg.connect(db, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS app_migrator")
        admin.execute("CREATE ROLE app_migrator")
        admin.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        admin.execute("CREATE SCHEMA app AUTHORIZATION app_migrator")
    try:
        as_app = f"{db} options='-c role=app_migrator -c search_path=app'"
        folder = write_migrations(tmp_path / "m", {"0001_a.sql": "CREATE TABLE a (id int);\n"})
        denied = run_cli("migrate", "--dsn", as_app, "--dir", str(folder))
        assert denied.returncode == 1 and "permission denied for schema public" in \
            denied.stderr
        done = run_cli("migrate", "--dsn", as_app, "--dir", str(folder), "--history-table",
                       "app.migrations")
        assert done.returncode == 0, done.stderr
        assert columns(db, "app.a") == ["id"]
        with psycopg.connect(db) as conn:
            assert conn.execute("SELECT version FROM app.migrations").fetchall() == [(1,)]
        status = run_cli("migrate", "--dsn", as_app, "--dir", str(folder), "--status",
                         "--history-table", "app.migrations")
        assert status.returncode == 0 and "app.migrations" in status.stdout
    finally:
        with psycopg.connect(db, autocommit=True) as admin:
            admin.execute("DROP SCHEMA app CASCADE")
            admin.execute("DROP OWNED BY app_migrator")
            admin.execute("DROP ROLE app_migrator")


def test_loading_is_linear_in_file_size(tmp_path):
    """Loading 16x the statements takes far under 256x the CPU time (it was quadratic).

    CPU time of the best of three, and a 4x margin either way between linear (16x) and
    quadratic (256x), so a busy host cannot fail it; bench/ holds the speed figures."""
    row = "INSERT INTO t (id, note) VALUES (1, 'a note; with a semicolon');\n"
    timings = []
    for count in (1000, 16000):  # ~0.07 MB and ~1 MB
        folder = tmp_path / str(count)
        folder.mkdir()
        (folder / "0001_big.sql").write_text("CREATE TABLE t (id int, note text);\n"
                                             + row * count)
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            [migration] = source.load_dir(folder)
            best = min(best, time.process_time() - start)
        timings.append(best)
        assert len(migration.statements) == count + 1
        assert migration.statements[-1].line == count + 1
    assert timings[1] < max(timings[0], 0.001) * 64, timings


def test_the_error_names_the_session_an_earlier_try_saw_when_the_last_one_saw_none():
    """A try too short for the blocker watch to look (a slow host) does not wipe out what an
    earlier try saw: the final error still names that session."""
    import psycopg

    from pgsteady.errors import MigrationBlocked
    from pgsteady.migrate.apply import Policy, with_lock_retries
    from pgsteady.migrate.preflight import Blocker, Session

    holder = Blocker(Session(4242, "hidden-report", "app", None, "idle in transaction", 9.0,
                             9.0, "SELECT 1"), "holds", "AccessShareLock", "public.t", None)
    looks = iter([[holder], [], []])

    def try_once(attempt):
        raise psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")

    policy = Policy(retries=2, retry_budget=5.0, first_wait=0.01, max_wait=0.01,
                    first_lock_timeout=0.1, lock_timeout=0.1)
    with pytest.raises(MigrationBlocked) as err:
        with_lock_retries(try_once, policy, what="0002_add",
                          name_blockers=lambda exc: next(looks))
    assert "pid 4242 'hidden-report'" in str(err.value)
    assert "holds AccessShareLock on public.t" in str(err.value)
