"""What the deploy tests share: the question each caller asks to recognise its own answer,
a PgBouncer in transaction mode in front of a fresh database, and the environment the
services in ``apps/`` (the Deploying page's sources) start with."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from pgsteady.lab.cluster import Cluster

APPS = Path(__file__).parent / "apps"
SRC = Path(__file__).parents[2] / "src"
BIN = Path(sys.executable).parent

ASK = "select %s::text, pg_backend_pid()"
"""Each call asks for a text naming its own process and request: an answer carrying another
text is another caller's row (the fork bug), never a coincidence."""


class Bouncer(NamedTuple):
    cluster: Cluster
    dsn: str  # through PgBouncer (transaction mode)
    direct: str  # straight to PostgreSQL, for checks
    dbname: str


@pytest.fixture
def bouncer(pgsteady_stack: Callable[..., Cluster], pgsteady_database: Any) -> Bouncer:
    """A PgBouncer in transaction mode (pool 8, behind the fault proxy) over a fresh database."""
    cluster = pgsteady_stack(pool_size=8, proxy=True, pool_mode="transaction")
    return Bouncer(cluster, cluster.pooled_dsn(pgsteady_database.name),
                   pgsteady_database.dsn, pgsteady_database.name)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def app_env(**extra: str) -> dict[str, str]:
    """The environment a service under test starts with: this worktree's pgsteady and the
    apps folder on the path, the venv's commands first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(APPS), env.get("PYTHONPATH", "")])
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env.update(extra)
    return env


def wait_http(port: int, proc: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """Wait until something accepts on ``port`` (or the process dies)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the service exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listened on {port} within {timeout:g} s")


def stop(proc: subprocess.Popen[Any], timeout: float = 20.0) -> str:
    """SIGTERM (a graceful stop for gunicorn and Celery), then SIGKILL; its output."""
    if proc.poll() is None:
        proc.terminate()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
    return out or ""
