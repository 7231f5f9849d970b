"""A fork never lands while an executor's thread is inside libpq connecting (``_fork._STEP``):
libpq's SCRAM runs in OpenSSL, whose locks a fork would leave held forever in the child, and
the child's first connection then hangs (measured before: 1 fork in 80)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgsteady import _fork
from pgsteady.runner import Database

EARLY = Path(__file__).with_name("forking_early.py")


class SlowStep(psycopg.Connection[Any]):
    """A connection whose first step inside the connection attempt takes 0.5 s (as OpenSSL's
    first initialisation can take a while), and says when it started."""

    inside = threading.Event()

    @classmethod
    def _connect_gen(cls, conninfo: str = "") -> Any:
        SlowStep.inside.set()
        time.sleep(0.5)
        return (yield from super()._connect_gen(conninfo))


def test_a_fork_waits_for_the_connection_step_in_flight(pgsteady_database):
    SlowStep.inside.clear()
    db = Database(pgsteady_database.dsn, pool_size=1,
                  pool_kwargs={"connection_class": SlowStep})
    try:
        assert SlowStep.inside.wait(10)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        waited = time.monotonic() - start
        os.waitpid(pid, 0)
        assert waited > 0.2  # the fork waited for the step, not the other way round
        assert db.fetchone("select 1", deadline=10) == (1,)
    finally:
        db.close(timeout=5)


def test_connection_steps_run_under_the_fork_lock(pgsteady_database):
    """Each step of a guarded attempt holds the lock; between steps (waiting on the socket)
    it is free, so a fork never waits for the network."""
    held = []

    class Watch(psycopg.Connection[Any]):
        @classmethod
        def _connect_gen(cls, conninfo: str = "") -> Any:
            inner = super()._connect_gen(conninfo)
            try:
                value = next(inner)
                while True:
                    held.append(_fork._STEP.locked())
                    sent = yield value
                    held.append(_fork._STEP.locked())
                    value = inner.send(sent)
            except StopIteration as done:
                return done.value

    guarded = _fork.fork_safe(Watch)
    conn = guarded.connect(pgsteady_database.dsn)
    conn.close()
    assert held and all(held)  # inside a step, as seen from within it
    assert not _fork._STEP.locked()  # and free once connected


@pytest.mark.parametrize("kind", ["sync", "async", "steady"])
def test_children_forked_while_the_pool_connects_all_connect(pgsteady_stack,
                                                             pgsteady_database, kind):
    """Through PgBouncer (SCRAM on every login), 30 processes each fork 0-12 ms after their
    Database (or Steady's engine) started connecting; every child's first call is answered,
    none hangs."""
    if kind == "steady":
        pytest.importorskip("sqlalchemy")
    cluster = pgsteady_stack(pool_size=8)
    dsn = cluster.pooled_dsn(pgsteady_database.name)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    rng = random.Random(37)
    outcomes: Counter[str] = Counter()
    for _ in range(30):
        done = subprocess.run(
            [sys.executable, str(EARLY), dsn, f"{rng.uniform(0.0, 0.012):.4f}", kind],
            env=env, capture_output=True, text=True, timeout=60, check=False)
        outcomes[{0: "answered", 1: "failed", 2: "hung"}.get(done.returncode, "other")] += 1
        if done.returncode not in (0, 2):
            outcomes[done.stderr[-300:]] += 1
    assert outcomes == {"answered": 30}, outcomes
