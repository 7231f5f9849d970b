"""blockers run by a role that cannot see other roles' sessions (no pg_monitor /
pg_read_all_stats): PostgreSQL hides their state, query and wait event, but pg_locks and
pg_blocking_pids still show who blocks whom. The lock queue must be found, and the command
must say what it cannot see instead of claiming nobody is blocked."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid

import psycopg
import pytest

from pgsteady.cli import main


def _waiting(dsn: str, count: int) -> bool:
    deadline = time.monotonic() + 10
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
            if row is not None and row[0] >= count:
                return True
            time.sleep(0.05)
    return False


@pytest.fixture
def unprivileged(pgsteady_database):
    """The test database's DSN as a role with no pg_monitor, and a lock queue in it: a
    session idle in transaction holding ACCESS SHARE, an ALTER waiting for ACCESS EXCLUSIVE,
    a read queued behind the ALTER (all three of another role)."""
    dsn = pgsteady_database.dsn
    role = f"watcher_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role}")
        admin.execute("CREATE TABLE queued (id int)")
    holder = psycopg.connect(dsn, application_name="web-idle")
    holder.execute("SELECT * FROM queued")  # then idle in transaction, holding ACCESS SHARE
    waiters = [psycopg.connect(dsn, autocommit=True, application_name=name)
               for name in ("the-migration", "a-reader")]

    def run(conn: psycopg.Connection, sql: str) -> None:
        with contextlib.suppress(psycopg.Error):  # ended when the holder goes away
            conn.execute(sql)

    threads = [threading.Thread(target=run, args=(waiters[0], "ALTER TABLE queued ADD x int"),
                                daemon=True)]
    threads[0].start()
    assert _waiting(dsn, 1)
    threads.append(threading.Thread(target=run, args=(waiters[1], "SELECT count(*) FROM queued"),
                                    daemon=True))
    threads[1].start()
    assert _waiting(dsn, 2)
    try:
        yield f"{dsn} options='-c role={role}'", holder.info.backend_pid, \
            [w.info.backend_pid for w in waiters]
    finally:
        holder.close()
        for thread in threads:
            thread.join(10)
        for conn in waiters:
            conn.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {role}")


def test_an_unprivileged_role_still_sees_the_lock_queue(unprivileged, capsys):
    """The root and its queue come from pg_locks even when pg_stat_activity hides the
    sessions: the holder is the root, the ALTER and the read are queued behind it."""
    dsn, holder, (alter, reader) = unprivileged
    assert main(["blockers", "--dsn", dsn, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == 1
    assert [c["root"]["pid"] for c in doc["chains"]] == [holder]
    chain = doc["chains"][0]
    assert chain["root"]["application_name"] == "web-idle"
    assert [(q["pid"], q["depth"]) for q in chain["queued"]] == [(alter, 1), (reader, 2)]
    assert chain["queued"][0]["lock_mode"] == "AccessExclusiveLock"
    assert doc["hidden_sessions"] >= 3


def test_an_unprivileged_role_is_told_what_it_cannot_see(unprivileged, capsys):
    """The text says the sessions' queries are hidden from this role and what grant shows
    them; no '<insufficient privilege>' passed off as a query."""
    dsn, holder, _ = unprivileged
    assert main(["blockers", "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert "no blocking" not in out
    assert f"ROOT pid {holder} 'web-idle'" in out
    assert "pg_monitor" in out and "hidden" in out
    assert "<insufficient privilege>" not in out
