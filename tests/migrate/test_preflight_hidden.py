"""preflight run by a role that cannot see other roles' sessions (no pg_monitor): PostgreSQL
hides their state and transaction start, but pg_locks still shows their locks. The session
in the way must still be named (it is the one to end), and said to be hidden, not skipped as
too young to matter."""

from __future__ import annotations

import uuid

import psycopg
from migrate_helpers import write_migrations

from pgsteady.migrate import preflight, source


def test_a_hidden_lock_holder_is_named(tmp_path, pgsteady_database):
    dsn = pgsteady_database.dsn
    role = f"deployer_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role}")
        admin.execute("CREATE TABLE accounts (id int)")
    folder = tmp_path / "m"
    folder.mkdir()
    write_migrations(folder, {"0001_flag.sql": "ALTER TABLE accounts ADD COLUMN flag int;\n"})
    holder = psycopg.connect(dsn, application_name="web-idle")
    try:
        holder.execute("SELECT * FROM accounts")  # idle in transaction, holding ACCESS SHARE
        with psycopg.connect(f"{dsn} options='-c role={role}'", autocommit=True) as conn:
            report = preflight.check(conn, source.load_dir(folder), min_age=0.2)
        pids = [b.session.pid for b in report.blockers]
        assert pids == [holder.info.backend_pid]
        line = report.summary()
        assert "'web-idle'" in line and "hidden from this role" in line
        assert "pg_monitor" in line
    finally:
        holder.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {role}")
