"""The server goes away while a migration runs (a shutdown, a crash, the session ended):
``pgsteady migrate`` says so, says whether that migration applied (or that it cannot know
yet), and exits 3, never "fix the migration"; the migration is not half-applied."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator

import psycopg
import pytest
from migrate_helpers import PGSTEADY, write_migrations

from pgsteady.lab import _process
from pgsteady.lab.cluster import Postgres, make_workdir

SLEEPY = {"0001_create.sql": "CREATE TABLE orgs (id int);\n",
          "0002_slow.sql": "ALTER TABLE orgs ADD COLUMN flag boolean;\nSELECT pg_sleep(60);\n"}


@pytest.fixture
def server() -> Iterator[Postgres]:
    """A throwaway PostgreSQL of this test's own, to stop under a migration."""
    who = _process.run_as()
    postgres = Postgres(make_workdir(None, who), who=who)
    postgres.start()
    try:
        yield postgres
    finally:
        postgres.stop()
        shutil.rmtree(postgres.workdir, ignore_errors=True)


def _migrate(dsn: str, folder, *more: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*PGSTEADY, "migrate", "--dsn", dsn, "--dir", str(folder), *more],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_sleep(dsn: str) -> int:
    """The pid of the backend running the slow migration, once it is in pg_sleep."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(600):
            row = conn.execute("SELECT pid FROM pg_stat_activity WHERE query LIKE "
                               "'%pg_sleep(60)%' AND pid <> pg_backend_pid() "
                               "AND state = 'active'").fetchone()
            if row is not None:
                return int(row[0])
            time.sleep(0.05)
    raise AssertionError("the migration never reached pg_sleep")


def _status(dsn: str, folder) -> str:
    done = subprocess.run([*PGSTEADY, "migrate", "--dsn", dsn, "--dir", str(folder),
                           "--status"], capture_output=True, text=True, timeout=60,
                          check=False)
    return done.stdout


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_server_stopped_mid_migration_says_so_and_exits_3(tmp_path, server, mode):
    """pg_ctl stop -m fast (57P01) or immediate (connection lost) under a migration: exit 3,
    "the server went away", its outcome unknown until the server is back; once it is,
    --status shows it pending and its ALTER not applied."""
    folder = write_migrations(tmp_path / "m", SLEEPY)
    dsn = server.dsn()
    runner = _migrate(dsn, folder)
    _wait_for_sleep(dsn)
    server.stop(mode=mode)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 3, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("pgsteady: error: the server went away while 0002_slow.sql ran")
    assert "whether 0002_slow.sql applied is unknown: check pgsteady migrate --status once " \
           "the server is back" in line
    assert "Fix the migration" not in err
    assert server.password not in out + err
    server.start()
    assert "2  pending" in _status(dsn, folder)
    with psycopg.connect(dsn) as conn:
        # (an immediate stop may also lose 0001's commit: the lab runs without fsync)
        assert conn.execute("SELECT count(*) FROM pg_attribute WHERE attrelid = "
                            "to_regclass('orgs') AND attname = 'flag'").fetchone()[0] == 0


def test_session_ended_mid_migration_reads_the_outcome_from_the_history(tmp_path, server):
    """The migration's backend terminated (57P01) while the server stays up: exit 3, and the
    history read on a new session says it did not apply."""
    folder = write_migrations(tmp_path / "m", SLEEPY)
    dsn = server.dsn()
    runner = _migrate(dsn, folder)
    pid = _wait_for_sleep(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", [pid])
    _out, err = runner.communicate(timeout=60)
    assert runner.returncode == 3, err
    line = err.strip().splitlines()[-1]
    assert "the server ended the session while 0002_slow.sql ran" in line
    assert "0002_slow.sql did not apply (public.pgsteady_migrations does not have it)" in line
    assert "2  pending" in _status(dsn, folder)
