"""Several migrations back to back, a message each: each all-or-nothing, retried alone, timed
alone."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time

import psycopg
import pytest
from migrate_helpers import FAST, columns, history, write_migrations

from pgsteady.errors import MigrationError
from pgsteady.migrate import apply, source
from pgsteady.migrate.testing import snapshot


def test_each_migration_is_sent_once_the_one_before_has_run(tmp_path, db, orgs_dir):
    """Five small migrations each reach the server in a message of their own, sent after
    the one before ran (so a killed runner leaves no message queued behind the one in
    flight), each committed in its own transaction with its own history row."""
    files = {"0002_stamps.sql": "CREATE TABLE stamps (step int, sent timestamptz, ran "
                                "timestamptz, xid xid8);\n"}
    for step in range(3, 8):
        files[f"{step:04d}_step.sql"] = (f"INSERT INTO stamps VALUES ({step}, "
                                         f"statement_timestamp(), clock_timestamp(), "
                                         f"pg_current_xact_id());\n")
    write_migrations(orgs_dir, files)
    done = apply.migrate(db, source.load_dir(orgs_dir), FAST)
    assert [a.version for a in done] == [2, 3, 4, 5, 6, 7]
    with psycopg.connect(db) as conn:
        rows = conn.execute("SELECT sent, ran FROM stamps ORDER BY step").fetchall()
        assert conn.execute("SELECT count(DISTINCT xid) FROM stamps").fetchone()[0] == 5
    assert all(later[0] > earlier[1] for earlier, later in itertools.pairwise(rows))
    assert history(db) == [1, 2, 3, 4, 5, 6, 7]


@pytest.mark.parametrize("pending", [4, 1])
def test_statement_this_servers_parser_refuses_is_named(tmp_path, db, orgs_dir, pending):
    """The server parses a whole message before running it: a statement pglast accepts but
    this server's parser refuses (here 'a\\' read without standard_conforming_strings, as a
    newer major version's syntax reads on an older server) refuses the whole batch. The
    migrations before it still commit, the error names its file:line:col, none after runs;
    alone (one pending) it is named the same."""
    with psycopg.connect(db, autocommit=True) as conn:
        name = conn.info.dbname
        conn.execute(f"ALTER DATABASE {name} SET standard_conforming_strings = off")
    files = {"0002_a.sql": "ALTER TABLE orgs ADD COLUMN a text;\n",
             "0003_b.sql": "UPDATE orgs SET a = 'x';\n",
             "0004_odd.sql": "UPDATE orgs SET a = 'y';\nUPDATE orgs SET a = 'back\\';\n",
             "0005_never.sql": "CREATE TABLE never (id int);\n"}
    if pending == 1:
        files = {"0004_odd.sql": files["0004_odd.sql"].replace("a = ", "name = ")}
    write_migrations(orgs_dir, files)
    reported: list[int] = []
    with pytest.raises(MigrationError, match=r"0004_odd.sql:2:\d+: UPDATE failed: 42601 "
                                             r"unterminated quoted string.*nothing of it was "
                                             r"applied") as info:
        apply.migrate(db, source.load_dir(orgs_dir), FAST,
                      on_applied=lambda a: reported.append(a.version))
    assert "0005" not in str(info.value)
    expected = [2, 3] if pending == 4 else []
    assert reported == expected
    assert history(db) == [1, *expected]
    assert columns(db, "never") == []


def test_failure_mid_batch_keeps_the_ones_before_and_runs_none_after(tmp_path, db, orgs_dir):
    """The third of five fails: the two before it are committed and reported, nothing of the
    third stays, the last two never run, and the error names the statement's file:line:col."""
    write_migrations(orgs_dir, {
        "0002_a.sql": "ALTER TABLE orgs ADD COLUMN a int;\n",
        "0003_b.sql": "ALTER TABLE orgs ADD COLUMN b int;\n",
        "0004_bad.sql": "ALTER TABLE orgs ADD COLUMN c int;\nSELECT nope FROM orgs;\n",
        "0005_d.sql": "ALTER TABLE orgs ADD COLUMN d int;\n",
        "0006_e.sql": "CREATE TABLE never (id int);\n",
    })
    reported: list[int] = []
    with pytest.raises(MigrationError, match=r"0004_bad.sql:2:8: SELECT failed: 42703.*"
                                             r"nothing of it was applied"):
        apply.migrate(db, source.load_dir(orgs_dir), FAST,
                      on_applied=lambda a: reported.append(a.version))
    assert reported == [2, 3]
    assert history(db) == [1, 2, 3]
    assert columns(db, "orgs") == ["id", "name", "a", "b"]
    assert columns(db, "never") == []


def test_a_blocked_migration_mid_batch_is_retried_alone(tmp_path, db, orgs_dir,
                                                        pgsteady_lock_holder, caplog):
    """The second of four waits on a lock: the first commits in the batch, the second is
    retried alone (its blocker named) once the lock is free, then the rest follow."""
    write_migrations(orgs_dir, {
        "0002_other.sql": "CREATE TABLE other (id int);\n",
        "0003_orgs.sql": "ALTER TABLE orgs ADD COLUMN flag boolean;\n",
        "0004_more.sql": "ALTER TABLE other ADD COLUMN note text;\n",
        "0005_last.sql": "CREATE TABLE last_one (id int);\n",
    })
    holder = pgsteady_lock_holder(db, "orgs", "ACCESS SHARE", application_name="batch-reader")
    threading.Timer(0.5, holder.release).start()
    policy = dataclasses.replace(FAST, retry_budget=3.0)
    with caplog.at_level(logging.WARNING, logger="pgsteady.migrate"):
        done = apply.migrate(db, source.load_dir(orgs_dir), policy, check_first=False)
    assert [(a.version, a.tries > 1) for a in done] == [(2, False), (3, True), (4, False),
                                                       (5, False)]
    assert history(db) == [1, 2, 3, 4, 5]
    assert columns(db, "orgs") == ["id", "name", "flag"]
    warnings = [r.getMessage() for r in caplog.records if "could not get its locks" in
                r.getMessage()]
    assert warnings and warnings[0].startswith("0003_orgs.sql: try 1 ")
    assert "lock_timeout 100 ms" in warnings[0]
    assert f"pid {holder.pid} 'batch-reader'" in warnings[0]


def test_each_history_row_times_its_own_migration(tmp_path, db, orgs_dir):
    """Three migrations of ~0.2 s in one message: each row's duration is its own (~200 ms),
    not the time since the message arrived (200, 400, 600)."""
    write_migrations(orgs_dir, {f"{n:04d}_sleep.sql": "SELECT pg_sleep(0.2);\n"
                                for n in (2, 3, 4)})
    done = apply.migrate(db, source.load_dir(orgs_dir), FAST)
    with psycopg.connect(db) as conn:
        rows = conn.execute("SELECT duration_ms FROM pgsteady_migrations WHERE version > 1 "
                            "ORDER BY version").fetchall()
    assert all(150 <= ms < 400 for (ms,) in rows), rows
    assert all(0.15 <= a.seconds < 0.4 for a in done), done


def test_no_transaction_migration_between_batches(tmp_path, db, orgs_dir):
    """A concurrent index build between transactional migrations runs alone, outside a
    transaction, and the batches around it apply as before."""
    write_migrations(orgs_dir, {
        "0002_a.sql": "ALTER TABLE orgs ADD COLUMN a int;\n",
        "0003_b.sql": "ALTER TABLE orgs ADD COLUMN b int;\n",
        "0004_index.sql": "-- pgsteady: no-transaction\n"
                          "CREATE INDEX CONCURRENTLY orgs_a ON orgs (a);\n",
        "0005_c.sql": "ALTER TABLE orgs ADD COLUMN c int;\n",
        "0006_d.sql": "ALTER TABLE orgs ADD COLUMN d int;\n",
    })
    before = snapshot(db)
    done = apply.migrate(db, source.load_dir(orgs_dir), FAST)
    assert [a.version for a in done] == [2, 3, 4, 5, 6]
    assert history(db) == [1, 2, 3, 4, 5, 6]
    assert snapshot(db) != before
    assert columns(db, "orgs") == ["id", "name", "a", "b", "c", "d"]
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = "
                            "'orgs_a'::regclass").fetchone()[0]


def test_quick_tries_back_to_back_never_open_the_watch(db):
    """Many quick tries in a row (a folder in several messages) do not add up to one long
    try: the blocker watch opens no connection; one try lasting past its interval does."""
    from pgsteady.migrate.watch import BlockerWatch

    opened: list[float] = []

    def connect() -> psycopg.Connection:
        opened.append(0.0)
        return psycopg.connect(db, autocommit=True)

    with psycopg.connect(db, autocommit=True) as conn:
        pid = conn.info.backend_pid
        with BlockerWatch(connect, pid, interval=0.05) as watch:
            for _ in range(12):  # 12 x 20 ms, back to back
                with watch.watching():
                    time.sleep(0.02)
            assert opened == []
            with watch.watching():
                time.sleep(0.3)
    assert len(opened) == 1


def test_steps_of_one_pass_count_as_tries_of_their_own(db):
    """Inside one watching() (an Alembic pass), steps that each end quickly (next_try) do not
    make the watch open its connection, however long the pass."""
    from pgsteady.migrate.watch import BlockerWatch

    opened: list[float] = []

    def connect() -> psycopg.Connection:
        opened.append(0.0)
        return psycopg.connect(db, autocommit=True)

    with psycopg.connect(db, autocommit=True) as conn, \
            BlockerWatch(connect, conn.info.backend_pid, interval=0.05) as watch, \
            watch.watching():
        for _ in range(12):
            time.sleep(0.02)
            watch.next_try()
    assert opened == []


def test_history_rows_are_prepared_once_and_left_as_found(tmp_path, db, orgs_dir):
    """The history row's statement is prepared once for the run (each migration sends an
    EXECUTE that also reads its clock), the rows are as before, and nothing stays prepared."""
    write_migrations(orgs_dir, {
        "0002_seen.sql": "CREATE TABLE seen AS SELECT name, statement FROM pg_prepared_statements;\n",
        "0003_more.sql": "ALTER TABLE orgs ADD COLUMN b int;\n",
        "0004_more.sql": "INSERT INTO seen SELECT name, statement FROM pg_prepared_statements;\n"})
    done = apply.migrate(db, source.load_dir(orgs_dir), FAST)
    assert [a.version for a in done] == [2, 3, 4] and all(a.seconds > 0 for a in done)
    with psycopg.connect(db) as conn:
        seen = conn.execute("SELECT name, statement FROM seen").fetchall()
        rows = conn.execute("SELECT version, tries, finished, duration_ms >= 0 "
                            "FROM pgsteady_migrations WHERE version > 1 ORDER BY 1").fetchall()
    assert [name for name, _ in seen] == ["pgsteady_history_record"] * 2
    assert "INSERT INTO" in seen[0][1] and "RETURNING" in seen[0][1]
    assert rows == [(2, 1, True, True), (3, 1, True, True), (4, 1, True, True)]

    store = apply.store_of(FAST, [])
    with psycopg.connect(db, autocommit=True) as conn:
        store.prepare(conn)
        migration = source.load_dir(orgs_dir)[-1]
        assert store.record_sql(conn, migration, 1, 0.0)[0].startswith(
            "EXECUTE pgsteady_history_record(4, 'more', ")
        store.unprepare(conn)
        assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0


def test_a_session_that_already_has_the_name_prepared_records_as_before(tmp_path, db, orgs_dir):
    """A session-mode pool may hand over a session that kept a statement of that name: the
    rows are then sent as plain statements, and that statement is not dropped."""
    store = apply.store_of(FAST, [])
    migration = source.load_dir(orgs_dir)[0]
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("PREPARE pgsteady_history_record AS SELECT 1")
        store.prepare(conn)
        assert not store.reads_clock(conn)
        [row] = store.record_sql(conn, migration, 1, 0.0)
        assert row.lstrip().startswith('INSERT INTO "public"."pgsteady_migrations"')
        store.unprepare(conn)
        assert conn.execute("SELECT name FROM pg_prepared_statements").fetchall() == \
            [("pgsteady_history_record",)]
