"""Bad environments get one clear line naming the cause and the fix, and leave nothing."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pgsteady.errors import LabError, UsageError
from pgsteady.lab.cluster import Cluster

PGSTEADY = [sys.executable, "-m", "pgsteady"]


def _lab_processes() -> list[str]:
    """Lab servers this process started: other labs on the same machine (other test runs,
    other users) are none of this test's business."""
    out = subprocess.run(["ps", "-o", "args=", "--ppid", str(os.getpid())],
                         capture_output=True, text=True, check=False)
    return [line for line in out.stdout.splitlines() if "pgsteady-lab-" in line]


def _processes_using(workdir: Path) -> list[str]:
    """Any process on the machine whose command line names ``workdir`` (a lab's own dir)."""
    out = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if str(workdir) in line]


def test_missing_binaries_say_how_to_install(monkeypatch, tmp_path):
    """With no PostgreSQL binaries to find, the error names apt-get."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("pgsteady.lab._process.glob.glob", lambda pattern: [])
    monkeypatch.setattr("pgsteady.lab._process.shutil.which", lambda name: None)
    with pytest.raises(LabError, match="apt-get install"):
        Cluster()


def test_port_taken_names_the_port():
    """A PostgreSQL port that is already in use is refused before anything starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(LabError, match=f"port {port} on 127.0.0.1 .* is taken"):
            Cluster(pg_port=port).start()
    assert _lab_processes() == []


def test_initdb_failure_is_one_line(monkeypatch):
    """If initdb fails, the error quotes its last line; no server is left running."""
    # Under /tmp itself: the servers' OS user (when we are root) must reach the fake initdb.
    fake = Path(tempfile.mkdtemp(prefix="pgsteady-fake-bin-"))
    fake.chmod(0o755)
    request_cleanup = fake
    real = Path(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                               check=True).stdout.strip())
    (fake / "postgres").symlink_to(real / "postgres")
    initdb = fake / "initdb"
    initdb.write_text("#!/bin/sh\necho 'initdb: error: simulated disk full' >&2\nexit 1\n")
    initdb.chmod(initdb.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PGSTEADY_PG_BINDIR", str(fake))
    try:
        with pytest.raises(LabError, match=r"initdb failed .*simulated disk full") as info:
            Cluster().start()
    finally:
        shutil.rmtree(request_cleanup)
    assert "\n" not in str(info.value)
    assert _lab_processes() == []


def test_missing_directory_is_named_not_created(tmp_path):
    """A base directory that does not exist is named in the error with the fix (--dir), and
    is not created."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    for missing in (blocker / "sub", tmp_path / "a" / "b"):
        with pytest.raises(UsageError, match=r"is not an existing directory; .*--dir"):
            Cluster(base_dir=missing).start()
    assert not (tmp_path / "a").exists()


def test_cli_reports_bad_environment_in_one_line(tmp_path):
    """`pgsteady lab up` with a taken port prints one line, no traceback, and exits 1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        out = subprocess.run([*PGSTEADY, "lab", "up", "--pg-port", str(port), "--once"],
                             capture_output=True, text=True, timeout=60,
                             env={**os.environ, "NO_COLOR": "1"}, check=False)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0
    assert f"port {port}" in out.stderr


def test_lab_up_prints_dsns_and_cleans_up_on_ctrl_c():
    """`pgsteady lab up` prints working DSNs, stays up, and on SIGINT stops every server and
    removes its directory."""
    import signal
    import time

    import psycopg

    proc = subprocess.Popen([*PGSTEADY, "lab", "up", "--proxy"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(6)]
        pooled = next(line.split(":", 1)[1].strip() for line in lines
                      if line.startswith("pooled:"))
        logs = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("logs:"))
        with psycopg.connect(pooled, prepare_threshold=None) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
        workdir = Path(logs).parent
        assert workdir.exists()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(0.2)
    assert not workdir.exists()
    assert not _processes_using(workdir)


def test_pool_drain_json_that_is_a_folder_is_refused_before_the_run(tmp_path, capsys):
    """`lab pool-drain --json DIR` is a usage error at once (it used to run the whole lab, then
    end in an IsADirectoryError traceback)."""
    from pgsteady.cli import main

    assert main(["lab", "pool-drain", "--strategy", "steady", "--json", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--json" in err and str(tmp_path) in err
