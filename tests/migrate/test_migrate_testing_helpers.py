"""The pytest helpers users get: a lock held in another session, and the fail-fast check."""

from __future__ import annotations

import psycopg
import pytest
from migrate_helpers import FAST, write_migrations

from pgsteady.errors import MigrationBlocked
from pgsteady.migrate.testing import assert_fails_fast_and_applies_nothing
from pgsteady.sql.analysis import LockMode


@pytest.mark.parametrize("mode", ["ACCESS SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE"])
def test_add_column_fails_fast_against_any_held_lock(tmp_path, db, orgs_dir,
                                                     pgsteady_lock_holder, mode):
    """ADD COLUMN against a lock of each mode fails within budget and leaves no trace."""
    write_migrations(orgs_dir, {
        "0002_add_flag.sql": "CREATE TABLE side (id int);\nALTER TABLE orgs ADD COLUMN flag boolean;\n"})
    pgsteady_lock_holder(db, "orgs", mode)
    outcome = assert_fails_fast_and_applies_nothing(db, orgs_dir, FAST)
    assert isinstance(outcome.error, MigrationBlocked)
    assert outcome.seconds <= FAST.retry_budget + 0.5


def test_the_check_fails_when_the_migration_applies(tmp_path, db, orgs_dir):
    """With no lock held the migration applies, and the helper says so."""
    write_migrations(orgs_dir, {"0002_add_flag.sql": "ALTER TABLE orgs ADD COLUMN flag boolean;\n"})
    with pytest.raises(AssertionError, match="the migrations applied"):
        assert_fails_fast_and_applies_nothing(db, orgs_dir, FAST)


def test_lock_holder_refuses_unknown_mode(db, orgs_dir, pgsteady_lock_holder):
    """A lock mode that does not exist is refused before any session is opened."""
    with pytest.raises(ValueError, match="SHARED"):
        pgsteady_lock_holder(db, "orgs", "SHARED")


@pytest.mark.parametrize("mode", list(LockMode))
def test_lock_holder_takes_the_mode_pg_locks_shows(db, orgs_dir, pgsteady_lock_holder, mode):
    """Each of the eight modes is held as asked, and its pg_locks name maps back to it."""
    holder = pgsteady_lock_holder(db, "orgs", mode)
    with psycopg.connect(db) as conn:
        [(name,)] = conn.execute(
            "SELECT mode FROM pg_locks WHERE pid = %s AND relation = 'orgs'::regclass",
            [holder.pid]).fetchall()
    assert name == mode.pg_name
    assert LockMode.from_pg_name(name) is mode
