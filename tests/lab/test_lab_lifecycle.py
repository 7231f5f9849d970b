"""The lab stops cleanly however it is stopped, and never leaves (or makes) what it should not."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgsteady.lab import _process
from pgsteady.lab._workdir import make_workdir, sweep_stale
from pgsteady.lab.cluster import Cluster

PGSTEADY = [sys.executable, "-m", "pgsteady"]


@pytest.fixture
def base_dir() -> Iterator[Path]:
    """A directory under /tmp the servers' OS user can enter (pytest's tmp_path is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="pgsteady-lifecycle-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _read_until(proc: subprocess.Popen[str], prefix: str, limit: int = 20) -> str:
    assert proc.stdout is not None
    for _ in range(limit):
        line = proc.stdout.readline()
        if line.startswith(prefix):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {prefix!r} line from {proc.args}")


def _processes_using(workdir: Path) -> list[str]:
    out = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if str(workdir) in line]


def test_cluster_started_in_a_thread_outlives_the_thread():
    """A Cluster started from a thread that then exits keeps its servers (the parent-death
    signal is per thread on Linux)."""
    made: list[Cluster] = []
    starter = threading.Thread(target=lambda: made.append(Cluster(pool_size=1).start()))
    starter.start()
    starter.join(120)
    cluster = made[0]
    try:
        time.sleep(0.5)  # a signal tied to the thread would have been delivered by now
        assert cluster.postgres is not None and cluster.postgres.running
        with psycopg.connect(cluster.pooled_dsn(), prepare_threshold=None) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
    finally:
        cluster.stop()


@pytest.mark.parametrize(("sig", "code", "line"),
                         [(signal.SIGINT, 130, "pgsteady: interrupted"),
                          (signal.SIGTERM, 143, "pgsteady: terminated (SIGTERM)")])
def test_lab_up_started_with_ampersand_stops_on_signal(base_dir, sig, code, line):
    """`pgsteady lab up &` from a script (SIGINT ignored by the shell) stops and cleans up on
    SIGINT (exit 130) and on SIGTERM (exit 143, 128 + 15, as the README says)."""
    script = f"{' '.join(PGSTEADY)} lab up --dir {base_dir} & wait $!"  # its exit code
    proc = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        workdir = Path(_read_until(proc, "logs:")).parent
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)],
                                  capture_output=True, text=True, check=True).stdout.split()
        assert len(children) == 1
        os.kill(int(children[0]), sig)
        assert proc.wait(60) == code
        err = proc.stderr.read()  # type: ignore[union-attr]
        assert "Traceback" not in err and line in err
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert not workdir.exists()


def test_lab_up_refuses_a_missing_dir_and_creates_nothing(base_dir):
    """`lab up --dir` naming a directory that does not exist exits 2 and does not create it."""
    missing = base_dir / "no" / "such" / "dir"
    out = subprocess.run([*PGSTEADY, "lab", "up", "--once", "--dir", str(missing)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2, out.stderr
    assert "not an existing directory" in out.stderr and "Traceback" not in out.stderr
    assert not (base_dir / "no").exists()


def test_sigkilled_lab_up_leaves_a_dir_the_next_start_sweeps(base_dir):
    """A `lab up` killed with SIGKILL leaves its directory; the next lab started there removes
    it, and keeps the directories of labs that still run."""
    with Cluster(pool_size=1, base_dir=base_dir) as alive:
        proc = subprocess.Popen([*PGSTEADY, "lab", "up", "--dir", str(base_dir)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            killed_dir = Path(_read_until(proc, "logs:")).parent
        finally:
            proc.kill()
            proc.wait(10)
        assert killed_dir.exists()
        deadline = time.monotonic() + 15  # its servers got their parent-death signal
        while _processes_using(killed_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _processes_using(killed_dir)
        fresh = make_workdir(base_dir, _process.run_as())
        assert not killed_dir.exists()
        assert alive.dir is not None and alive.dir.exists() and fresh.exists()
        assert sweep_stale(base_dir) == []


def test_ctrl_c_during_pool_drain_prints_no_traceback(base_dir):
    """Ctrl-C in the middle of `lab pool-drain` ends it with exit 130 and one line, no
    asyncio or proxy tracebacks."""
    proc = subprocess.Popen(
        [*PGSTEADY, "lab", "pool-drain", "--strategy", "naive", "--duration", "20s",
         "--ceiling-duration", "1s", "--burst", "30@0s-20s", "--dir", str(base_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        time.sleep(8)  # ceiling done, the naive run collapsing
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert "pgsteady: interrupted" in err


def test_lab_dir_is_removed_while_an_interrupted_initdb_still_writes(tmp_path):
    """Ctrl-C during `lab up` interrupts initdb, whose backend goes on writing into the data
    directory for a moment: the removal outlasts it instead of leaving a directory with no
    owner file (which no later sweep would remove)."""
    from pgsteady.lab.cluster import remove_tree

    lab_dir = tmp_path / "pgsteady-lab-x"
    (lab_dir / "pgdata" / "global").mkdir(parents=True)
    for i in range(300):
        (lab_dir / "pgdata" / "global" / str(i)).write_text("x")
    stop = time.monotonic() + 0.4

    def late_writer() -> None:  # plays the orphaned `postgres --boot`
        i = 0
        while time.monotonic() < stop:
            with contextlib.suppress(OSError):  # into the folders that are still there
                (lab_dir / "pgdata" / "global" / f"late{i}").write_text("x")
            i += 1
            time.sleep(0.001)

    writer = threading.Thread(target=late_writer)
    writer.start()
    try:
        remove_tree(lab_dir)
    finally:
        writer.join()
    assert not lab_dir.exists()


def test_a_port_taken_between_pick_and_bind_is_replaced(monkeypatch, pgsteady_stack):
    """Another process grabbing the port we picked before our server binds it (busy machines
    with many labs) costs a retry on another port, not a failed start."""
    import socket

    real = _process.free_port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        picks = iter([taken.getsockname()[1]])
        monkeypatch.setattr(_process, "free_port", lambda: next(picks, None) or real())
        stack = pgsteady_stack(pool_size=1)
        assert stack.pgbouncer.port != taken.getsockname()[1]
        with psycopg.connect(stack.pooled_dsn(), prepare_threshold=None) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
        picks = iter([taken.getsockname()[1]])
        cluster = Cluster(pool_size=1).start()
        try:
            assert cluster.postgres is not None
            assert cluster.postgres.port != taken.getsockname()[1]
        finally:
            cluster.stop()
