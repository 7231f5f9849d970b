"""The seed (002), scaled down: a dashboard query holds orgs open while a migration arrives.

Figures printed by this test (run with ``-s``) are the ones quoted in the report: the worst
stall a reader of ``orgs`` saw while ``pgsteady migrate`` tried and gave up, and the same
ALTER without a lock_timeout.
"""

from __future__ import annotations

import re
import threading
import time

import psycopg
from migrate_helpers import columns, history, run_cli, write_migrations

from pgsteady.migrate.testing import snapshot

LOCK_TIMEOUT = 0.3
BUDGET = 2.0


class Readers:
    """Threads reading orgs in a loop, each query timed; the worst is the stall."""

    def __init__(self, dsn: str, threads: int = 2) -> None:
        self.dsn = dsn
        self.stop = threading.Event()
        self.worst = 0.0
        self.queries = 0
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._read, daemon=True) for _ in range(threads)]

    def _read(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True, application_name="reader",
                             options="-c statement_timeout=20s") as conn:
            deadline = time.monotonic() + 30  # bounded even if stop is never set
            while not self.stop.is_set() and time.monotonic() < deadline:
                start = time.perf_counter()
                conn.execute("SELECT count(*) FROM orgs").fetchone()
                took = time.perf_counter() - start
                with self._lock:
                    self.worst = max(self.worst, took)
                    self.queries += 1
                time.sleep(0.005)

    def __enter__(self) -> Readers:
        for t in self._threads:
            t.start()
        time.sleep(0.2)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(5)


def test_seed_scaled_down(tmp_path, db, orgs_dir):
    """Preflight names dashboard-logs; migrate gives up in budget, readers never stall long."""
    write_migrations(orgs_dir, {"0002_add_flag.sql": "ALTER TABLE orgs ADD COLUMN flag boolean;\n"})
    dashboard = psycopg.connect(db, application_name="dashboard-logs")
    try:
        dashboard.execute("SELECT count(*) FROM orgs").fetchone()  # txn left open, like the 7h query
        pid = dashboard.info.backend_pid
        time.sleep(0.3)

        # 1. preflight refuses and names the session.
        result = run_cli("preflight", "--dsn", db, "--dir", str(orgs_dir), "--blocker-age", "100ms")
        assert result.returncode == 1, result.stderr
        assert f"pid {pid} 'dashboard-logs'" in result.stdout
        assert "holds AccessShareLock on public.orgs" in result.stdout
        assert "pg_terminate_backend" in result.stdout
        # ... and so does migrate, which runs the preflight first.
        result = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir), "--blocker-age", "100ms")
        assert result.returncode == 1
        assert f"pid {pid} 'dashboard-logs'" in result.stderr

        # 2. migrate --no-preflight: tries, gives up within budget, readers never stall long.
        before = snapshot(db)
        with Readers(db) as readers:
            start = time.monotonic()
            result = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir), "--no-preflight",
                             "--lock-timeout", f"{LOCK_TIMEOUT * 1000:.0f}ms",
                             "--first-lock-timeout", "100ms", "--retries", "50",
                             "--retry-budget", f"{BUDGET}s")
            wall = time.monotonic() - start
        assert result.returncode == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        error = [line for line in lines if line.startswith("pgsteady: error:")]
        assert len(error) == 1, result.stderr
        assert f"pid {pid} 'dashboard-logs'" in error[0]
        assert "nothing of it was applied" in error[0]
        spent = float(re.search(r"tries over ([\d.]+)s", error[0])[1])
        tries = int(re.search(r"in (\d+) tries", error[0])[1])
        print(f"\n[seed] migrate --no-preflight gave up after {tries} tries in {spent:.2f}s "
              f"(budget {BUDGET}s, process wall {wall:.2f}s); worst reader stall "
              f"{readers.worst * 1000:.0f} ms over {readers.queries} reads "
              f"(lock_timeout cap {LOCK_TIMEOUT * 1000:.0f} ms)")
        assert spent <= BUDGET + 0.1
        assert tries >= 3
        assert readers.worst <= LOCK_TIMEOUT + 0.05
        assert snapshot(db) == before
        assert history(db) == [1]

        # 3. The same ALTER with no lock_timeout: readers queue until the blocker ends.
        release_after = 1.5
        with Readers(db) as readers, psycopg.connect(db, autocommit=True) as naive:
            naive.execute("SET lock_timeout = 0")
            threading.Timer(release_after, dashboard.rollback).start()
            naive.execute("BEGIN")
            naive.execute("ALTER TABLE orgs ADD COLUMN naive boolean")
            naive.execute("ROLLBACK")
        print(f"[seed] same ALTER without lock_timeout: worst reader stall "
              f"{readers.worst * 1000:.0f} ms (blocker ended after {release_after * 1000:.0f} ms)")
        assert readers.worst >= release_after - 0.5
    finally:
        dashboard.close()

    # 4. The blocker is gone: migrate applies.
    result = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir))
    assert result.returncode == 0, result.stderr
    assert "applied 2 add_flag" in result.stdout
    assert columns(db, "orgs") == ["id", "name", "flag"]
    assert history(db) == [1, 2]
