"""SIGTERM (what Kubernetes and systemd send) ends every verb as Ctrl-C does: one line, the work
it started on the server cancelled, not left to finish after the process is gone."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psycopg

PGSTEADY = [sys.executable, "-m", "pgsteady"]


def test_sigterm_during_migrate_cancels_the_migration(pgsteady_database, tmp_path):
    """A migrate killed by SIGTERM mid-statement exits 143 in one line, and its migration is
    rolled back on the server (it used to run on and commit after the process died)."""
    (tmp_path / "0001_slow.sql").write_text("select pg_sleep(4);\ncreate table slow (id int);\n")
    proc = subprocess.Popen([*PGSTEADY, "migrate", "--dsn", pgsteady_database.dsn, "--dir",
                             str(tmp_path), "--no-preflight"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
            give_up = time.monotonic() + 20
            while time.monotonic() < give_up and not conn.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE query LIKE '%pg_sleep(4)%' "
                    "AND pid <> pg_backend_pid()").fetchone():
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
            time.sleep(0.3)
            running = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                                   "'%pg_sleep(4)%' AND pid <> pg_backend_pid()").fetchone()
            time.sleep(4)  # past the sleep: a statement left running would have committed
            table = conn.execute("SELECT to_regclass('slow')").fetchone()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143
    assert err.strip().splitlines() == ["pgsteady: terminated (SIGTERM)"]
    assert running == (0,)
    assert table == (None,)
