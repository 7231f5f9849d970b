"""Applying: one transaction per migration, history with it, all or nothing, one runner."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

import psycopg
import pytest
from migrate_helpers import FAST, columns, history, write_migrations

from pgsteady.errors import MigrationBlocked, MigrationError
from pgsteady.migrate import apply, source
from pgsteady.migrate.testing import snapshot


def test_applies_pending_in_order_and_records_history(tmp_path, db, orgs_dir):
    """Pending migrations apply in version order, each recorded with its tries."""
    write_migrations(orgs_dir, {
        "0002_add_flag.sql": "ALTER TABLE orgs ADD COLUMN flag boolean;\n",
        "0003_add_note.sql": "ALTER TABLE orgs ADD COLUMN note text;\n",
    })
    done = apply.migrate(db, source.load_dir(orgs_dir), FAST)
    assert [(a.version, a.tries) for a in done] == [(2, 1), (3, 1)]
    assert columns(db, "orgs") == ["id", "name", "flag", "note"]
    assert history(db) == [1, 2, 3]
    assert apply.migrate(db, source.load_dir(orgs_dir), FAST) == []  # idempotent


def test_session_is_labelled(tmp_path, db, orgs_dir):
    """The migration session carries application_name pgsteady-migrate@host:pid."""
    write_migrations(orgs_dir, {
        "0002_who.sql": "CREATE TABLE who AS SELECT current_setting('application_name') AS a;\n"})
    apply.migrate(db, source.load_dir(orgs_dir), FAST)
    with psycopg.connect(db) as conn:
        label = conn.execute("SELECT a FROM who").fetchone()[0]
    assert label == apply.application_name()
    assert label.startswith("pgsteady-migrate@") and label.endswith(f":{__import__('os').getpid()}")


def test_failing_statement_mid_migration_leaves_nothing(tmp_path, db, orgs_dir):
    """A statement failing in the middle rolls back the whole migration and its history row."""
    write_migrations(orgs_dir, {
        "0002_half.sql": """
            ALTER TABLE orgs ADD COLUMN flag boolean;
            CREATE TABLE audit (id int);
            UPDATE orgs SET name = NULL WHERE id = 1;
            ALTER TABLE orgs ADD COLUMN never int;
        """,
        "0003_after.sql": "CREATE TABLE after_it (id int);\n",
    })
    before = snapshot(db)
    with pytest.raises(MigrationError) as err:
        apply.migrate(db, source.load_dir(orgs_dir), FAST)
    message = str(err.value)
    assert "0002_half.sql:3: UPDATE failed: 23502" in message
    assert "nothing of it was applied" in message
    assert snapshot(db) == before
    assert history(db) == [1]


def test_statement_timeout_fails_cleanly(tmp_path, db, orgs_dir):
    """A statement running past statement_timeout is cancelled; nothing is applied."""
    write_migrations(orgs_dir, {
        "0002_slow.sql": "ALTER TABLE orgs ADD COLUMN flag boolean;\nSELECT pg_sleep(5);\n"})
    policy = dataclasses.replace(FAST, statement_timeout=0.3)
    start = time.monotonic()
    with pytest.raises(MigrationError, match=r"0002_slow.sql:2: SELECT failed: statement_timeout "
                                             r"of 0.3s reached; nothing of it was applied"):
        apply.migrate(db, source.load_dir(orgs_dir), policy)
    assert time.monotonic() - start < 3
    assert columns(db, "orgs") == ["id", "name"]


def test_retries_until_the_lock_is_free(tmp_path, db, orgs_dir, pgsteady_lock_holder, caplog):
    """A lock released during the budget: the migration retries, naming its blocker, then applies."""
    write_migrations(orgs_dir, {"0002_add_flag.sql": "ALTER TABLE orgs ADD COLUMN flag boolean;\n"})
    holder = pgsteady_lock_holder(db, "orgs", "ACCESS SHARE", application_name="nightly-report")
    threading.Timer(0.6, holder.release).start()
    policy = dataclasses.replace(FAST, retry_budget=3.0)
    with caplog.at_level(logging.WARNING, logger="pgsteady.migrate"):
        [done] = apply.migrate(db, source.load_dir(orgs_dir), policy, check_first=False)
    assert done.tries >= 2
    assert columns(db, "orgs") == ["id", "name", "flag"]
    warnings = [r.getMessage() for r in caplog.records if "could not get its locks" in r.getMessage()]
    assert warnings
    assert f"pid {holder.pid} 'nightly-report'" in warnings[0]
    assert "holds AccessShareLock on public.orgs" in warnings[0]
    assert "lock_timeout 100 ms" in warnings[0]
    if len(warnings) > 1:
        assert "lock_timeout 200 ms" in warnings[1]  # escalates


def test_lock_timeouts_escalate_to_the_cap():
    """The default schedule doubles from 100 ms to a 5 s cap; waits are jittered and bounded."""
    policy = apply.Policy()
    assert [policy.lock_timeout_for(n) for n in range(1, 9)] == [
        0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    waits = [policy.wait_before(n) for n in range(2, 40)]
    assert all(0 < w <= policy.max_wait for w in waits)
    assert len(set(waits)) > 1


def test_two_runners_one_applies_other_names_holder(tmp_path, db, orgs_dir):
    """While one runner applies, a second waits its bounded time and names the first."""
    write_migrations(orgs_dir, {
        "0002_slow.sql": "SELECT pg_sleep(2);\nALTER TABLE orgs ADD COLUMN flag boolean;\n"})
    migrations = source.load_dir(orgs_dir)
    first: list[object] = []
    runner = threading.Thread(target=lambda: first.append(apply.migrate(db, migrations, FAST)))
    runner.start()
    time.sleep(0.5)
    second = dataclasses.replace(FAST, runner_wait=0.5)
    start = time.monotonic()
    with pytest.raises(MigrationBlocked) as err:
        apply.migrate(db, migrations, second)
    waited = time.monotonic() - start
    runner.join(10)
    assert 0.4 <= waited < 1.5
    assert "another migration runner is active: pid" in str(err.value)
    assert f"'{apply.application_name()}'" in str(err.value)
    assert [a.version for a in first[0]] == [2]  # type: ignore[attr-defined]
    assert history(db) == [1, 2]


def test_preflight_refuses_and_names_blocker(tmp_path, db, orgs_dir, pgsteady_lock_holder):
    """migrate's preflight refuses while a session holds a conflicting lock, naming it."""
    write_migrations(orgs_dir, {"0002_add_flag.sql": "ALTER TABLE orgs ADD COLUMN flag boolean;\n"})
    holder = pgsteady_lock_holder(db, "orgs", "ROW EXCLUSIVE", application_name="billing-job")
    time.sleep(0.2)
    with pytest.raises(MigrationBlocked) as err:
        apply.migrate(db, source.load_dir(orgs_dir), FAST)
    message = str(err.value)
    assert f"pid {holder.pid} 'billing-job'" in message
    assert "holds RowExclusiveLock on public.orgs" in message
    assert "0002_add_flag.sql:1 ALTER TABLE ... ADD COLUMN needs ACCESS EXCLUSIVE" in message
    assert "pg_terminate_backend" in message
    assert history(db) == [1]


def test_preflight_for_concurrent_index(tmp_path, db, orgs_dir, pgsteady_lock_holder):
    """CREATE INDEX CONCURRENTLY: readers do not block it; open writers and old snapshots do."""
    write_migrations(orgs_dir, {
        "0002_idx.sql": "-- pgsteady: no-transaction\n"
                        "CREATE INDEX CONCURRENTLY orgs_name ON orgs (name);\n"})
    migrations = source.load_dir(orgs_dir)
    reader = pgsteady_lock_holder(db, "orgs", "ACCESS SHARE")
    time.sleep(0.2)
    assert apply.run_preflight(db, migrations, FAST).blockers == []
    reader.release()

    writer = pgsteady_lock_holder(db, "orgs", "ROW EXCLUSIVE", application_name="importer")
    time.sleep(0.2)
    [blocker] = apply.run_preflight(db, migrations, FAST).blockers
    assert (blocker.session.pid, blocker.reason, blocker.lock_mode) == (
        writer.pid, "holds", "RowExclusiveLock")
    writer.release()

    with psycopg.connect(db, application_name="analyst") as old:
        old.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        old.execute("SELECT 1 FROM pg_class LIMIT 1")
        time.sleep(0.2)
        [blocker] = apply.run_preflight(db, migrations, FAST).blockers
        assert (blocker.session.application_name, blocker.reason) == ("analyst", "old snapshot")


@pytest.mark.parametrize(("tool", "files", "table"), [
    ("pgsteady", {"0001_t.sql": "CREATE TABLE t (id int);\nSELECT 1 / 0;\n"},
     "pgsteady_migrations"),
    ("flyway", {"V1__t.sql": "CREATE TABLE t (id int);\nSELECT 1 / 0;\n"},
     "flyway_schema_history"),
    ("goose", {"00001_t.sql": "-- +goose Up\nCREATE TABLE t (id int);\nSELECT 1 / 0;\n"},
     "goose_db_version"),
])
def test_a_failed_first_run_leaves_no_history_table_behind(tmp_path, db, tool, files, table):
    """The history table a first run created goes again when that run applied nothing: the
    database is left exactly as it was found (found by QA on a real Flyway folder)."""
    folder = write_migrations(tmp_path / "m", files)
    before = snapshot(db)
    with pytest.raises(MigrationError):
        apply.migrate(db, source.load_dir(folder, tool), FAST)
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (f"public.{table}",)).fetchone() == (None,)
    assert snapshot(db) == before


def test_a_failed_later_run_keeps_the_history(tmp_path, db, orgs_dir):
    write_migrations(orgs_dir, {"0002_bad.sql": "SELECT 1 / 0;\n"})
    with pytest.raises(MigrationError):
        apply.migrate(db, source.load_dir(orgs_dir), FAST)
    assert history(db) == [1]
