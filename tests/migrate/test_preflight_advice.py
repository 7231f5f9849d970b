"""What preflight tells an operator to end: the session holding the lock, not the victims
queued behind it (ending those stops work and frees nothing)."""

from __future__ import annotations

import contextlib
import threading
import time

import psycopg
from migrate_helpers import write_migrations

from pgsteady.migrate import preflight, source


def _waiting(dsn: str) -> bool:
    end = time.monotonic() + 10
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < end:
            row = conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
            if row is not None and row[0] >= 1:
                return True
            time.sleep(0.05)
    return False


def test_the_advice_names_the_holder_not_the_queue_behind_it(tmp_path, pgsteady_database):
    dsn = pgsteady_database.dsn
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("CREATE TABLE ledger (id int)")
    folder = tmp_path / "m"
    folder.mkdir()
    write_migrations(folder, {"0001_note.sql": "ALTER TABLE ledger ADD COLUMN note text;\n"})
    holder = psycopg.connect(dsn, application_name="report-job")
    waiter = psycopg.connect(dsn, autocommit=True, application_name="other-deploy")

    def alter() -> None:
        with contextlib.suppress(psycopg.Error):
            waiter.execute("ALTER TABLE ledger ADD COLUMN other int")

    thread = threading.Thread(target=alter, daemon=True)
    try:
        holder.execute("SELECT * FROM ledger")  # idle in transaction, holding ACCESS SHARE
        thread.start()
        assert _waiting(dsn)
        time.sleep(0.3)  # both older than min_age
        with psycopg.connect(dsn, autocommit=True) as conn:
            report = preflight.check(conn, source.load_dir(folder), min_age=0.2)
        assert {b.session.pid for b in report.blockers} == \
            {holder.info.backend_pid, waiter.info.backend_pid}
        advice = report.what_to_end()
        assert f"(pid {holder.info.backend_pid})" in advice
        assert str(waiter.info.backend_pid) not in advice
        assert "1 waiting behind them" in advice
        assert "pgsteady blockers --terminate" in report.summary()
    finally:
        holder.close()
        thread.join(10)
        waiter.close()
