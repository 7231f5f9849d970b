"""no-transaction migrations: CREATE INDEX CONCURRENTLY outside a transaction; an INVALID
index left by a failed build is found and dropped before the next try."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

import psycopg
import pytest
from migrate_helpers import FAST, history, write_migrations

from pgsteady.errors import MigrationBlocked, MigrationError
from pgsteady.migrate import apply, source


def index_state(dsn: str, name: str) -> bool | None:
    """True valid, False INVALID, None absent."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)",
                           [name]).fetchone()
    return None if row is None else row[0]


INDEX = {"0002_unique_name.sql": """
    -- Built without blocking writes.
    -- pgsteady: no-transaction
    CREATE UNIQUE INDEX CONCURRENTLY orgs_name_key ON orgs (name);
"""}


def test_failed_build_leaves_invalid_index_next_run_drops_it(tmp_path, db, orgs_dir, caplog):
    """A failed unique build leaves an INVALID index; the next run drops it and rebuilds."""
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("UPDATE orgs SET name = 'dup' WHERE id IN (1, 2)")
    write_migrations(orgs_dir, INDEX)
    with pytest.raises(MigrationError) as err:
        apply.migrate(db, source.load_dir(orgs_dir), FAST)
    assert "0002_unique_name.sql:3: CREATE INDEX CONCURRENTLY failed: 23505" in str(err.value)
    assert index_state(db, "orgs_name_key") is False  # the INVALID index PostgreSQL leaves
    assert history(db) == [1]

    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("UPDATE orgs SET name = 'org 2' WHERE id = 2")
    with caplog.at_level(logging.WARNING, logger="pgsteady.migrate"):
        [done] = apply.migrate(db, source.load_dir(orgs_dir), FAST)
    assert done.version == 2
    assert any("dropping invalid index public.orgs_name_key" in r.getMessage()
               for r in caplog.records)
    assert index_state(db, "orgs_name_key") is True
    assert history(db) == [1, 2]


def test_blocked_build_retries_and_cleans_up(tmp_path, db, orgs_dir):
    """A build behind an open writer retries, dropping its INVALID index, until the writer ends."""
    write_migrations(orgs_dir, INDEX)
    writer = psycopg.connect(db, application_name="importer")
    writer.execute("INSERT INTO orgs VALUES (1000, 'new org')")  # open ROW EXCLUSIVE, uncommitted
    threading.Timer(1.0, writer.commit).start()
    policy = dataclasses.replace(FAST, retry_budget=4.0)
    try:
        start = time.monotonic()
        [done] = apply.migrate(db, source.load_dir(orgs_dir), policy, check_first=False)
    finally:
        writer.close()
    assert done.tries >= 2
    assert time.monotonic() - start < 4.5
    assert index_state(db, "orgs_name_key") is True


def test_blocked_build_gives_up_in_budget(tmp_path, db, orgs_dir, pgsteady_lock_holder):
    """A build behind a writer that never ends gives up in budget naming it; the next run heals."""
    write_migrations(orgs_dir, INDEX)
    writer = pgsteady_lock_holder(db, "orgs", "ROW EXCLUSIVE", application_name="importer")
    start = time.monotonic()
    with pytest.raises(MigrationBlocked) as err:
        apply.migrate(db, source.load_dir(orgs_dir), FAST, check_first=False)
    assert time.monotonic() - start <= FAST.retry_budget + 0.5
    assert f"pid {writer.pid} 'importer'" in str(err.value)
    assert history(db) == [1]
    writer.release()
    apply.migrate(db, source.load_dir(orgs_dir), FAST)
    assert index_state(db, "orgs_name_key") is True
    assert history(db) == [1, 2]


def test_valid_index_without_history_is_recorded_not_rebuilt(db, orgs_dir, caplog):
    """A build that finished but lost its history row (the connection died in between) is
    recorded on the next run instead of failing on "already exists" forever."""
    apply.migrate(db, source.load_dir(orgs_dir), FAST)  # 0001 only
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CREATE UNIQUE INDEX CONCURRENTLY orgs_name_key ON orgs (name)")
        oid = conn.execute("SELECT 'orgs_name_key'::regclass::oid::int8").fetchone()[0]
    write_migrations(orgs_dir, INDEX)
    with caplog.at_level(logging.WARNING, logger="pgsteady.migrate"):
        apply.migrate(db, source.load_dir(orgs_dir), FAST)
    assert history(db) == [1, 2]
    assert "already exists and is valid" in caplog.text
    with psycopg.connect(db) as conn:  # the same index, not a rebuilt one
        assert conn.execute("SELECT 'orgs_name_key'::regclass::oid::int8").fetchone()[0] == oid
