"""A forked child's sessions are labelled with the child's pid, not its parent's: the label is
how pg_stat_activity (and pgsteady blockers) name the process to look at."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = r"""
import os, sys
kind, dsn = sys.argv[1], sys.argv[2]
if kind == "database":
    from pgsteady import Database
    db = Database(dsn, pool_size=1)
    ask = lambda: db.fetchone("select current_setting('application_name')", deadline=10)[0]
else:
    from sqlalchemy import create_engine, text
    from pgsteady.sqlalchemy import Steady, url_from_dsn
    db = Steady(create_engine(url_from_dsn(dsn), pool_size=1, max_overflow=0))
    ask = lambda: db.scalar(text("select current_setting('application_name')"), deadline=10)
print("parent", os.getpid(), ask(), flush=True)
child = os.fork()
if child == 0:
    print("child", os.getpid(), ask(), flush=True)
    os._exit(0)
os.waitpid(child, 0)
print("parent", os.getpid(), ask(), flush=True)
db.close()
"""


@pytest.mark.parametrize("kind", ["database", "steady"])
def test_a_forked_childs_sessions_carry_its_own_pid(pgsteady_database, kind):
    """Parent and child each see their own pid at the end of application_name (the child's
    said the parent's: svc@host:5820 from pid 5890)."""
    out = subprocess.run([sys.executable, "-c", SCRIPT, kind, pgsteady_database.dsn],
                         capture_output=True, text=True, timeout=120, check=True)
    lines = [line.split() for line in out.stdout.splitlines()]
    assert [who for who, _, _ in lines] == ["parent", "child", "parent"], out.stderr
    for _who, pid, label in lines:
        assert label.endswith(f":{pid}"), (pid, label)
