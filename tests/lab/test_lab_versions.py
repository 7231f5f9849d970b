"""The lab on every installed PostgreSQL major (``scripts/postgres-versions.sh``)."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest

from pgsteady.errors import VersionNotInstalled
from pgsteady.lab.cluster import Cluster


def _lab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pgsteady", "lab", *args],
                          capture_output=True, text=True, timeout=180, check=False)


@pytest.mark.pg_versions
def test_lab_up_once_runs_and_prints_the_major_asked_for(pg_version):
    """`lab up --pg-version N --once` queries a PostgreSQL N through PgBouncer and exits 0."""
    out = _lab("up", "--pg-version", str(pg_version), "--once")
    assert out.returncode == 0, out.stderr
    assert f"query through PgBouncer ok: PostgreSQL {pg_version}." in out.stdout


def test_an_uninstalled_major_is_one_line_naming_the_script_and_exit_2():
    """Asking for a major that is not installed says how to install it, in one line, exit 2."""
    out = _lab("up", "--pg-version", "99", "--once")
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1
    assert "PostgreSQL 99 is not installed" in out.stderr
    assert "scripts/postgres-versions.sh 99" in out.stderr


def test_cluster_refuses_an_uninstalled_major_before_starting_anything():
    """Cluster(pg_version=N) for a missing N raises VersionNotInstalled (exit code 2)."""
    with pytest.raises(VersionNotInstalled) as caught:
        Cluster(pg_version=99)
    assert caught.value.exit_code == 2


@pytest.mark.pg_versions(13)
def test_the_oldest_supported_major_serves_the_lab_stack(pg_version, pgsteady_postgres_version):
    """PostgreSQL 13 (whose initdb re-hashes a SCRAM secret) still logs PgBouncer in."""
    server = pgsteady_postgres_version(pg_version)
    with Cluster(postgres=server) as cluster, \
            psycopg.connect(cluster.pooled_dsn(), prepare_threshold=None) as conn:
        row = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
    assert row is not None and row[0] // 10000 == 13
