"""Fixtures for the migrate tests: a fresh database, a table ``orgs`` already migrated."""

from __future__ import annotations

import pytest
from migrate_helpers import FAST, write_migrations


@pytest.fixture
def db(pgsteady_database):
    """A fresh database's DSN."""
    return pgsteady_database.dsn


@pytest.fixture
def orgs_dir(tmp_path, db):
    """A folder whose 0001 migration (already applied) creates table orgs with some rows."""
    from pgsteady.migrate import apply, source

    folder = write_migrations(tmp_path / "migrations", {
        "0001_create_orgs.sql": """
            CREATE TABLE orgs (id int PRIMARY KEY, name text NOT NULL);
            INSERT INTO orgs SELECT g, 'org ' || g FROM generate_series(1, 100) g;
        """,
    })
    apply.migrate(db, source.load_dir(folder), FAST)
    return folder
