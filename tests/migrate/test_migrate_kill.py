"""A ``pgsteady migrate`` killed mid-run: what it leaves applied is what the history says.

The server runs the whole of a message it has received, even once the client is gone; the
runner sends a migration only after the one before has committed, so a kill leaves committed
at most the migration in flight, with its history row.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psycopg
from migrate_helpers import PGSTEADY, history, run_cli, write_migrations

# wait_event, not the query text: that is cut at track_activity_query_size
RUNNERS = ("SELECT pid, wait_event FROM pg_stat_activity "
           "WHERE application_name LIKE 'pgsteady-migrate%'")


def _wait_for(dsn: str, done: object, what: str, timeout: float = 30.0) -> list[tuple]:
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            rows = conn.execute(RUNNERS).fetchall()
            if done(rows):  # type: ignore[operator]
                return rows
            time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_killed_runner_leaves_applied_exactly_what_the_history_says(tmp_path, db):
    """SIGKILL while migration 4 of 10 sleeps on the server: afterwards 1-3 and at most the
    one in flight (4) are applied, each with its history row, none after it ran (they were
    batched into the killed runner's message, and committed after it was gone), and --status
    says so."""
    files = {"0001_marks.sql": "CREATE TABLE marks (version int PRIMARY KEY);\n"
                               "INSERT INTO marks VALUES (1);\n"}
    for version in range(2, 11):
        body = f"INSERT INTO marks VALUES ({version});\n"
        if version == 4:
            body += "SELECT pg_sleep(1.5);\n"
        files[f"{version:04d}_mark.sql"] = body
    folder = write_migrations(tmp_path / "migrations", files)
    runner = subprocess.Popen([*PGSTEADY, "migrate", "--dsn", db, "--dir", str(folder),
                               "--no-preflight"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=os.environ.copy())
    try:
        _wait_for(db, lambda rows: any(event == "PgSleep" for _, event in rows),
                  "migration 4 to be running")
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    _wait_for(db, lambda rows: not rows, "the killed runner's sessions to end")
    with psycopg.connect(db) as conn:
        marks = [r[0] for r in conn.execute("SELECT version FROM marks ORDER BY 1").fetchall()]
    recorded = history(db)
    assert marks == recorded
    assert recorded in ([1, 2, 3], [1, 2, 3, 4])  # at most the migration in flight
    shown = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--status")
    states = {line.split()[0]: line.split()[1] for line in shown.stdout.splitlines()[1:]}
    assert states == {str(v): "applied" if v in recorded else "pending" for v in range(1, 11)}
    again = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--no-preflight")
    assert again.returncode == 0, again.stderr
    assert history(db) == list(range(1, 11))
