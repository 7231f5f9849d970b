"""After os.fork a child builds its own connections and never touches its parent's: every
answer is the child's own, and the parent's sessions survive the children (issue 37)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

APP = Path(__file__).with_name("forking_app.py")
CHILDREN, CALLS = 3, 40


def _run(tmp_path: Path, *, dsn: str, admin_dsn: str, kind: str, leave: str,
         pooler: str = "direct", children: int = CHILDREN, calls: int = CALLS,
         hold_locks: bool = False, busy_parent: bool = False) -> dict[str, Any]:
    """forking_app.py in its own interpreter (a fork under pytest would fork pytest too)."""
    options = {"dsn": dsn, "admin_dsn": admin_dsn, "kind": kind, "leave": leave,
               "pooler": pooler, "children": children, "calls": calls, "out": str(tmp_path),
               "hold_locks": hold_locks, "busy_parent": busy_parent}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(APP), json.dumps(options)], env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _check(report: dict[str, Any], *, direct: bool) -> None:
    """0 wrong answers and 0 errors in every child and in the parent, before and after; the
    parent's sessions are the same ones, and no child ever ran on one of them."""
    assert report["exit_codes"] == [0] * len(report["exit_codes"]), report
    for child in report["children"]:
        assert child is not None, report
        assert (child["wrong"], child["errors"]) == (0, 0), child
        if direct:  # the child's own sessions, never the parent's
            assert not set(child["pids"]) & set(report["sessions_before"]), report
    for part in ("before", "after", "busy"):
        assert (report[part]["wrong"], report[part]["errors"]) == (0, 0), report[part]
    if direct:
        assert set(report["sessions_before"]) <= set(report["sessions_after"]), report
        assert set(report["after"]["pids"]) <= set(report["sessions_before"]), report


@pytest.mark.parametrize("kind", ["fetchone", "run", "async", "steady", "asteady"])
@pytest.mark.parametrize("leave", ["exit", "_exit", "mp", "close"])
def test_forked_children_get_their_own_answers_directly(
        tmp_path, pgsteady_database, kind, leave):
    """Database (one-statement calls and run), AsyncDatabase in the child's own loop, Steady
    and AsyncSteady: made and used before os.fork / multiprocessing (fork), each child's
    answers are its own, and the parent's sessions survive the children's exit."""
    if kind in ("steady", "asteady"):
        pytest.importorskip("sqlalchemy")
    dsn = pgsteady_database.dsn
    report = _run(tmp_path, dsn=dsn, admin_dsn=dsn, kind=kind, leave=leave)
    _check(report, direct=True)


@pytest.mark.parametrize("kind", ["fetchone", "run", "async", "steady", "asteady"])
def test_forked_children_get_their_own_answers_through_pgbouncer(
        tmp_path, pgsteady_stack, pgsteady_database, kind):
    """The same behind the lab's PgBouncer in transaction mode: no child's statement is
    answered on another process's client connection, and the parent keeps its own."""
    if kind in ("steady", "asteady"):
        pytest.importorskip("sqlalchemy")
    cluster = pgsteady_stack(pool_size=4)
    reader = cluster.pgbouncer.log_reader()
    report = _run(tmp_path, dsn=cluster.pooled_dsn(pgsteady_database.name),
                  admin_dsn=pgsteady_database.dsn, kind=kind, leave="exit",
                  pooler="transaction")
    _check(report, direct=False)
    assert reader.counts().total["not_ready"] == 0


@pytest.mark.parametrize("kind", ["fetchone", "steady"])
def test_a_child_forked_while_the_parents_locks_are_held_does_not_wait_for_them(
        tmp_path, pgsteady_database, kind):
    """Another thread of the parent holds the executor's lock and its breaker's at the
    moment of the fork: the child starts with its own and never waits on the dead ones."""
    if kind == "steady":
        pytest.importorskip("sqlalchemy")
    dsn = pgsteady_database.dsn
    report = _run(tmp_path, dsn=dsn, admin_dsn=dsn, kind=kind, leave="_exit", children=2,
                  calls=10, hold_locks=True)
    _check(report, direct=True)


@pytest.mark.parametrize("kind", ["fetchone", "run", "steady"])
def test_children_forked_while_a_parent_thread_keeps_calling(tmp_path, pgsteady_database, kind):
    """A thread of the parent calls without pause while the main thread forks (a statement
    may be in flight at the fork): no wrong answer or error in the parent or any child."""
    if kind == "steady":
        pytest.importorskip("sqlalchemy")
    dsn = pgsteady_database.dsn
    report = _run(tmp_path, dsn=dsn, admin_dsn=dsn, kind=kind, leave="exit",
                  busy_parent=True)
    assert report["busy"]["calls"] > 0
    _check(report, direct=True)
