"""Issue 10's "what is wrong today", cases 1-4, on the lab's PostgreSQL: every blocker is
found by preflight (prediction) and named by migrate (watching), once per session."""

from __future__ import annotations

import dataclasses
import threading
import time

import psycopg
import pytest
from migrate_helpers import FAST, history, write_migrations

from pgsteady.errors import MigrationBlocked, MigrationError
from pgsteady.migrate import apply, source

# Blocked runs give up quickly: the point is who they name, not how long they try.
QUICK = dataclasses.replace(FAST, retry_budget=0.6, retries=5)


@pytest.fixture
def fk_dir(tmp_path, db):
    """parent <- child (foreign key child_parent_fkey on parent_id), both migrated."""
    folder = write_migrations(tmp_path / "migrations", {
        "0001_tables.sql": """
            CREATE TABLE parent (id int PRIMARY KEY, name text);
            CREATE TABLE child (id int PRIMARY KEY,
                                parent_id int CONSTRAINT child_parent_fkey REFERENCES parent,
                                note text);
            CREATE TABLE other (id int PRIMARY KEY, parent_id int);
            INSERT INTO parent VALUES (1, 'one');
            CREATE VIEW parent_names AS SELECT name FROM parent;
            CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql
                AS $$BEGIN RETURN NEW; END$$;
            CREATE TRIGGER parent_touch BEFORE UPDATE ON parent
                FOR EACH ROW EXECUTE FUNCTION touch();
        """,
    })
    apply.migrate(db, source.load_dir(folder), FAST)
    return folder


def _open_read(dsn: str, query: str, name: str) -> psycopg.Connection:
    """A session that ran ``query`` in a transaction it leaves open (idle in transaction)."""
    conn = psycopg.connect(dsn, application_name=name)
    conn.execute(query)  # type: ignore[arg-type]
    return conn


FK_CASES = [
    "ALTER TABLE child DROP CONSTRAINT child_parent_fkey",
    "DROP TABLE child",
    "ALTER TABLE child DROP COLUMN parent_id",
    "ALTER TABLE other ADD CONSTRAINT other_parent_fkey FOREIGN KEY (parent_id) "
    "REFERENCES parent",
]


@pytest.mark.parametrize("statement", FK_CASES)
def test_foreign_key_other_side_blocks(db, fk_dir, statement):
    """A reader of parent blocks changes to child's foreign key; preflight and migrate say so."""
    write_migrations(fk_dir, {"0002_change.sql": statement + ";\n"})
    migrations = source.load_dir(fk_dir)
    reader = _open_read(db, "SELECT count(*) FROM parent", "parent-report")
    try:
        if "ADD CONSTRAINT" in statement:  # SHARE ROW EXCLUSIVE: a writer is in the way
            reader.execute("UPDATE parent SET name = name")
        [blocker] = apply.run_preflight(db, migrations, FAST).blockers
        assert blocker.session.pid == reader.info.backend_pid
        assert blocker.relation == "public.parent"
        with pytest.raises(MigrationBlocked) as err:
            apply.migrate(db, migrations, QUICK, check_first=False)
        message = str(err.value)
        assert f"pid {reader.info.backend_pid} 'parent-report'" in message
        assert "may have ended" not in message
    finally:
        reader.close()
    assert history(db) == [1]


@pytest.mark.parametrize(("statement", "holder_sql"), [
    ("CREATE OR REPLACE VIEW parent_names AS SELECT name, id FROM parent",
     "SELECT count(*) FROM parent_names"),
    ("COMMENT ON TABLE parent IS 'the parents'", "LOCK TABLE parent IN SHARE MODE"),
    ("DROP TRIGGER parent_touch ON parent", "SELECT count(*) FROM parent"),
    ("ALTER TABLE parent RENAME CONSTRAINT parent_pkey TO parent_key",
     "SELECT count(*) FROM parent"),
])
def test_statements_once_unknown_are_known(db, fk_dir, statement, holder_sql):
    """CREATE OR REPLACE VIEW, COMMENT ON, DROP TRIGGER: their locks are known and checked."""
    write_migrations(fk_dir, {"0002_change.sql": statement + ";\n"})
    migrations = source.load_dir(fk_dir)
    assert all(s.targets for s in migrations[-1].statements)
    holder = _open_read(db, holder_sql, "holder")
    try:
        [blocker] = apply.run_preflight(db, migrations, FAST).blockers
        assert blocker.session.pid == holder.info.backend_pid
    finally:
        holder.close()


def test_young_idle_in_transaction_is_a_blocker(db, fk_dir):
    """A session idle in a transaction 0.3 s old holds its lock: a blocker at any age."""
    write_migrations(fk_dir, {"0002_add.sql": "ALTER TABLE parent ADD COLUMN flag boolean;\n"})
    migrations = source.load_dir(fk_dir)
    reader = _open_read(db, "SELECT count(*) FROM parent", "young-reader")
    try:
        report = apply.run_preflight(db, migrations, dataclasses.replace(FAST, blocker_age=5.0))
        assert [b.session.pid for b in report.blockers] == [reader.info.backend_pid]
        assert report.blockers[0].session.state == "idle in transaction"
    finally:
        reader.close()


def _run_in_thread(dsn: str, query: str, name: str) -> threading.Thread:
    def work() -> None:
        with psycopg.connect(dsn, application_name=name) as conn:
            conn.execute(query)  # type: ignore[arg-type]
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def _wait_active(dsn: str, name: str) -> None:
    deadline = time.monotonic() + 5
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if conn.execute("SELECT 1 FROM pg_stat_activity WHERE application_name = %s "
                            "AND state = 'active'", [name]).fetchone():
                return
            time.sleep(0.02)
    raise AssertionError(f"{name} never became active")


def test_young_active_query_is_sampled_again(db, fk_dir):
    """An active query younger than min_age is looked at again: a long one is then named."""
    write_migrations(fk_dir, {"0002_add.sql": "ALTER TABLE parent ADD COLUMN flag boolean;\n"})
    migrations = source.load_dir(fk_dir)
    policy = dataclasses.replace(FAST, blocker_age=0.5)
    slow = _run_in_thread(db, "SELECT pg_sleep(2.5), count(*) FROM parent", "slow-report")
    _wait_active(db, "slow-report")
    start = time.monotonic()
    report = apply.run_preflight(db, migrations, policy)
    assert [b.session.application_name for b in report.blockers] == ["slow-report"]
    assert 0.3 <= time.monotonic() - start < 2.0  # it waited for min_age, not for the query
    slow.join(5)
    short = _run_in_thread(db, "SELECT pg_sleep(0.2), count(*) FROM parent", "short-read")
    _wait_active(db, "short-read")
    assert apply.run_preflight(db, migrations, policy).blockers == []
    short.join(5)


def test_one_entry_per_session_on_the_table(db, tmp_path):
    """A session locking a table and its seven indexes is one blocker, named on the table."""
    folder = write_migrations(tmp_path / "m", {
        "0001_accounts.sql": "CREATE TABLE accounts (id int PRIMARY KEY, "
                             + ", ".join(f"c{i} int" for i in range(6)) + ");\n"
                             + "".join(f"CREATE INDEX accounts_c{i} ON accounts (c{i});\n"
                                       for i in range(6)),
    })
    apply.migrate(db, source.load_dir(folder), FAST)
    write_migrations(folder, {"0002_add.sql": "ALTER TABLE accounts ADD COLUMN x int;\n"})
    migrations = source.load_dir(folder)
    reader = _open_read(db, "SELECT count(*) FROM accounts WHERE c1 = 1", "accounts-report")
    try:
        with psycopg.connect(db) as conn:
            held = conn.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND "
                                "locktype = 'relation'", [reader.info.backend_pid]).fetchone()
        assert held[0] >= 8  # the table and its seven indexes
        report = apply.run_preflight(db, migrations, FAST)
        [blocker] = report.blockers
        assert blocker.relation == "public.accounts"
        assert "1 session(s) would block" in report.summary()
        assert "on public.accounts" in report.summary()
    finally:
        reader.close()


def test_migrate_names_what_it_saw_in_its_way(db, fk_dir):
    """A blocker the analysis cannot predict (a computed EXECUTE) is named from
    pg_blocking_pids()."""
    write_migrations(fk_dir, {"0002_do.sql": "DO $$ BEGIN EXECUTE 'ALTER TABLE ' || "
                                             "quote_ident(lower('PARENT')) || "
                                             "' ADD COLUMN flag boolean'; END $$;\n"})
    migrations = source.load_dir(fk_dir)
    reader = _open_read(db, "SELECT count(*) FROM parent", "hidden-reader")
    try:
        report = apply.run_preflight(db, migrations, FAST)
        assert report.blockers == [] and report.unknown  # cannot predict, and says so
        with pytest.raises(MigrationBlocked) as err:
            apply.migrate(db, migrations, QUICK, check_first=False)
        message = str(err.value)
        assert f"pid {reader.info.backend_pid} 'hidden-reader'" in message
        assert "holds AccessShareLock on public.parent" in message
    finally:
        reader.close()
    with psycopg.connect(db) as conn:  # the watch's session is gone with the run
        left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name "
                            "LIKE 'pgsteady-migrate-watch@%'").fetchone()
    assert left[0] == 0
    assert history(db) == [1]


def test_errors_keep_detail_hint_and_position(db, fk_dir):
    """A failing statement's message keeps DETAIL and HINT and points at file:line:col."""
    write_migrations(fk_dir, {"0002_bad.sql": "ALTER TABLE parent ADD COLUMN flag boolean;\n"
                                              "SELECT 1;\n"
                                              "  SELECT id,\n         nosuchcolumn FROM parent;\n"})
    with pytest.raises(MigrationError) as err:
        apply.migrate(db, source.load_dir(fk_dir), FAST)
    assert "0002_bad.sql:4:10: SELECT failed: 42703" in str(err.value)
    write_migrations(fk_dir, {"0002_bad.sql": "DROP TABLE parent;\n"})
    with pytest.raises(MigrationError) as err:
        apply.migrate(db, source.load_dir(fk_dir), FAST)
    message = str(err.value)
    assert "0002_bad.sql:1: DROP TABLE failed: 2BP01" in message
    assert "DETAIL: constraint child_parent_fkey on table child depends on table parent" in message
    assert "HINT: Use DROP ... CASCADE" in message
    assert "\n" not in message


def test_migrate_names_the_chain_behind_its_blocker(db, fk_dir):
    """Blocked by B, itself waiting on A: both are named, A as the one blocking B."""
    write_migrations(fk_dir, {"0002_other.sql": "ALTER TABLE other ADD COLUMN z int;\n"})
    migrations = source.load_dir(fk_dir)
    first = _open_read(db, "SELECT count(*) FROM parent", "report-a")
    second = _open_read(db, "LOCK TABLE other IN ROW EXCLUSIVE MODE", "job-b")
    waiting = threading.Thread(target=lambda: second.execute(
        "LOCK TABLE parent IN ACCESS EXCLUSIVE MODE"), daemon=True)
    waiting.start()
    try:
        with pytest.raises(MigrationBlocked) as err:
            apply.migrate(db, migrations, QUICK, check_first=False)
        message = str(err.value)
        b_pid, a_pid = second.info.backend_pid, first.info.backend_pid
        assert f"pid {b_pid} 'job-b'" in message
        assert "holds RowExclusiveLock on public.other" in message
        assert f"pid {a_pid} 'report-a'" in message and f"blocks pid {b_pid}" in message
    finally:
        first.close()
        waiting.join(5)
        second.close()
    assert history(db) == [1]


def test_watch_sees_through_a_session_pooler(db, fk_dir, pgsteady_stack, pgsteady_database):
    """Behind PgBouncer (session mode) the watch uses the server's pid, not the pooler's key."""
    pooled = pgsteady_stack(pool_mode="session", pool_size=4).pooled_dsn(pgsteady_database.name)
    write_migrations(fk_dir, {"0002_do.sql": "DO $$ BEGIN EXECUTE 'ALTER TABLE parent "
                                             "ADD COLUMN flag boolean'; END $$;\n"})
    reader = _open_read(db, "SELECT count(*) FROM parent", "hidden-reader")
    try:
        with pytest.raises(MigrationBlocked) as err:
            apply.migrate(pooled, source.load_dir(fk_dir), QUICK, check_first=False)
        assert f"pid {reader.info.backend_pid} 'hidden-reader'" in str(err.value)
    finally:
        reader.close()


def test_a_later_look_that_misses_the_lock_keeps_what_an_earlier_one_saw():
    """pg_locks and pg_blocking_pids() are not read at one instant: a look can see the
    blocker but not its lock row. Within a try, the lock seen earlier stays named, with the
    session as last seen; a sighting that does name a lock wins."""
    from pgsteady.migrate.preflight import Blocker, Session
    from pgsteady.migrate.watch import sharper

    def session(age: float) -> Session:
        return Session(7, "job-b", "app", None, "active", age, age, "LOCK TABLE parent")

    held = Blocker(session(0.1), "holds", "RowExclusiveLock", "public.other", None)
    vague = Blocker(session(0.6), "blocks it", None, None, None)
    kept = sharper(held, vague)
    assert (kept.reason, kept.lock_mode, kept.relation) == ("holds", "RowExclusiveLock",
                                                            "public.other")
    assert kept.session.xact_age == 0.6
    assert "holds RowExclusiveLock on public.other" in kept.describe()
    assert sharper(None, vague) is vague
    queued = Blocker(session(0.7), "waits for", "AccessExclusiveLock", "public.other", None)
    assert sharper(held, queued) is queued
