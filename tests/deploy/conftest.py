"""What the deploy tests share: the question each caller asks to recognise its own answer,
a PgBouncer in transaction mode in front of a fresh database, and the environment the
services in ``apps/`` (the Deploying page's sources) start with."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from celery import Celery

from pgsteady.lab.cluster import Cluster
from pgsteady.lab.redis_server import RedisServer

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


def parent_clients(bouncer: Bouncer, pid: int, *, at_least: int = 0,
                   timeout: float = 15.0) -> set[int]:
    """The ports of PgBouncer's clients opened by process ``pid`` (their application_name
    ends in ``:pid``): a child that closed or used one of the parent's sessions would have
    ended it. Waits until there are ``at_least`` of them."""
    deadline = time.monotonic() + timeout
    while True:
        ports = {row["port"] for row in bouncer.cluster.pgbouncer.admin("SHOW CLIENTS")
                 if str(row.get("application_name", "")).endswith(f":{pid}")}
        if len(ports) >= at_least or time.monotonic() > deadline:
            return ports
        time.sleep(0.1)


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
    """SIGTERM (a graceful stop for gunicorn and Celery), then SIGKILL; its output. Whatever
    is left of its session (a worker whose master was killed) is killed too: the servers a
    test starts are in a session of their own (``start_new_session``), so none outlives it."""
    if proc.poll() is None:
        proc.terminate()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return out or ""


def get(port: int, path: str, timeout: float = 30.0) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        response = conn.getresponse()
        body = response.read()
        try:
            data = json.loads(body)
        except ValueError:
            data = {"raw": body[:200].decode(errors="replace")}
        return response.status, data
    finally:
        conn.close()


def until_ready(port: int, path: str, *, period: float = 1.0, within: float = 30.0,
                timeout: float = 30.0) -> tuple[int, dict[str, Any], int]:
    """Ask ``path`` as a kubelet asks a readinessProbe: again every ``period`` until it answers
    200, for at most ``within`` seconds (a pod stays out of rotation until then; a readiness
    failure never restarts it). Returns the last status and body and how many asks it took."""
    end = time.monotonic() + within
    asks = 0
    while True:
        asks += 1
        try:
            status, body = get(port, path, timeout=timeout)
        except OSError as exc:
            status, body = 0, {"error": repr(exc)}
        if status == 200 or time.monotonic() + period > end:
            return status, body, asks
        time.sleep(period)


def start_gunicorn(config: str, app: str, bouncer: Bouncer, tmp_path: Path,
                   *extra: str, **env: str) -> tuple[subprocess.Popen[str], int, Path]:
    """gunicorn with one of the page's configs, bound to a free port; its log in a file."""
    port = free_port()
    log = tmp_path / "gunicorn.log"
    proc = subprocess.Popen(
        ["gunicorn", "-c", str(APPS / config), "-b", f"127.0.0.1:{port}", *extra, app],
        cwd=APPS, stdout=log.open("w"), stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # stop() kills what is left of the session
        env=app_env(PGSTEADY_DSN=bouncer.dsn, MASTER_REPORT=str(tmp_path / "master.json"),
                    **env))
    try:
        wait_http(port, proc)
    except BaseException:
        stop(proc)
        raise
    return proc, port, log


class Worker:
    """A ``celery worker`` child process and a client app to send it tasks by name."""

    def __init__(self, bouncer: Bouncer, redis: RedisServer, log: Path, **env: str) -> None:
        self.bouncer = bouncer
        broker = redis.url
        backend = redis.url[:-1] + "1"  # results in Redis database 1
        self.log = log
        self.proc = subprocess.Popen(
            ["celery", "-A", "celery_app", "worker", "--pool=prefork", "--concurrency=2",
             "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=APPS, stdout=log.open("w"), stderr=subprocess.STDOUT, text=True,
            start_new_session=True,  # stop() kills what is left of the session
            env=app_env(PGSTEADY_DSN=bouncer.dsn, CELERY_BROKER_URL=broker,
                        CELERY_RESULT_BACKEND=backend, **env))
        self.client = Celery("client", broker=broker, backend=backend)
        self.client.conf.broker_connection_retry_on_startup = True

    def send(self, name: str, *args: Any) -> Any:
        return self.client.send_task(f"celery_app.{name}", args=args)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while "ready." not in self.log.read_text():
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the Celery worker did not start"
            time.sleep(0.2)

    def close(self) -> str:
        self.client.close()
        return self.log.read_text() + stop(self.proc, timeout=30)


@pytest.fixture
def celery_worker(bouncer: Bouncer, pgsteady_redis: RedisServer,
                  tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    made: list[Worker] = []

    def make(**env: str) -> Worker:
        made.append(Worker(bouncer, pgsteady_redis, tmp_path / f"worker{len(made)}.log", **env))
        made[-1].wait_ready()
        return made[-1]

    yield make
    for worker in made:
        worker.close()
