"""A DSN that reaches PgBouncer's admin console where a database is meant: one line, exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

PGSTEADY = [sys.executable, "-m", "pgsteady"]


@pytest.mark.parametrize("verb", [["migrate"], ["preflight"], ["migrate", "--status"],
                                  ["lint", "--dsn"]])
def test_admin_console_dsn_is_a_usage_error(pgsteady_stack, tmp_path, verb):
    """migrate, preflight and lint --dsn name the admin console instead of "cannot connect"."""
    lab = pgsteady_stack(pool_size=1, proxy=False)
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "0001_t.sql").write_text("create table t (id int);\n")
    if verb[0] == "lint":
        argv = [*PGSTEADY, "lint", "--dsn", lab.admin_dsn, str(folder / "0001_t.sql")]
    else:
        argv = [*PGSTEADY, *verb, "--dsn", lab.admin_dsn, "--dir", str(folder)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "PgBouncer's admin console" in done.stderr and "Traceback" not in done.stderr
