"""The lock-queue lab: seed 002's chain must end in an outage, the same deploy under pgsteady
must hold, and nothing the lab starts may outlive it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pgsteady.errors import UsageError
from pgsteady.lab import _process
from pgsteady.lab.gateway import GatewayConfig
from pgsteady.lab.scenarios import lock_queue
from pgsteady.lab.scenarios._lock_queue_sampler import closed_by_client
from pgsteady.lab.scenarios.lock_queue import LockQueueConfig, run_lock_queue, verdict
from pgsteady.lab.supervisor import Supervisor
from pgsteady.report import build_report

PGSTEADY = [sys.executable, "-m", "pgsteady"]
DEAD_DSN = "host=127.0.0.1 port=1 dbname=none user=nobody connect_timeout=1"


@pytest.fixture
def labdir():
    """A directory the servers' OS user can enter (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="pgsteady-lqtest-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _row(ok: int, failed: int) -> dict:
    zero = {"cached": 0, "uncached": 0, "dashboard": 0}
    return {"ok": {**zero, "uncached": ok}, "failed": {**zero, "uncached": failed},
            "timed_out": zero}


def test_outage_needs_ten_seconds_in_a_row_below_half():
    """Nine bad seconds are not an outage; ten in a row are; seconds with no lookups do not
    break a streak."""
    good, bad = _row(10, 0), _row(4, 6)
    assert verdict([good] + [bad] * 9 + [good]) == "held"
    assert verdict([good] + [bad] * 10) == "outage"
    assert verdict([bad] * 5 + [_row(0, 0)] + [bad] * 5) == "outage"


@pytest.mark.parametrize(
    ("kwargs", "complaint"),
    [
        ({"deploy_at": 70.0}, "--deploy-at 70s lies outside the 60 s run"),
        ({"replicas": 0}, "--replicas must be between 1 and 16"),
        ({"replicas": 500}, "--replicas must be between 1 and 16"),
        ({"rate": 0}, "--rate must be at least 1"),
        ({"long_query_at": (61.0,)}, "--long-query-at 61s lies outside"),
        ({"strategies": ("pgx",)}, "unknown strategy 'pgx'"),
    ],
)
def test_bad_knobs_are_usage_errors(kwargs, complaint):
    """Impossible scenarios are refused before anything starts, naming the knob."""
    with pytest.raises(UsageError, match=complaint):
        LockQueueConfig(**kwargs)


@pytest.mark.parametrize("argv", [["--deploy-at", "90s"], ["--replicas", "0"], ["--rate", "0"],
                                  ["--replicas", "500"], ["--json", "/tmp"]])
def test_bad_knobs_exit_2_in_one_line(argv):
    """The CLI turns a bad knob into one line on stderr and exit code 2."""
    out = subprocess.run([*PGSTEADY, "lab", "lock-queue", *argv], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1
    assert argv[0] in out.stderr


def test_closed_by_client_reads_close_wait_sockets(tmp_path):
    """Only server-side sockets in CLOSE_WAIT on the server's port count as left behind."""
    table = tmp_path / "tcp"
    table.write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue\n"
        "   0: 0100007F:1538 0100007F:9C40 08 00000000:00000000\n"   # 5432 <- 40000, CLOSE_WAIT
        "   1: 0100007F:1538 0100007F:9C41 01 00000000:00000000\n"   # established
        "   2: 0100007F:1F90 0100007F:9C42 08 00000000:00000000\n")  # another port
    assert closed_by_client(5432, table) == {40000}


def _listening_addresses(port: int) -> set[str]:
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    lines += Path("/proc/net/tcp6").read_text().splitlines()[1:] \
        if Path("/proc/net/tcp6").exists() else []
    found = set()
    for line in lines:
        fields = line.split()
        address, hex_port = fields[1].rsplit(":", 1)
        if fields[3] == "0A" and int(hex_port, 16) == port:
            found.add(address)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@pytest.mark.lab
def test_supervisor_restarts_on_liveness_and_only_unroutes_on_readiness(tmp_path):
    """With the database unreachable, a steady replica (process-only liveness) is live but
    not ready, so never killed; a naive one (liveness queries the database) is restarted
    after 3 failed probes. Replicas listen on loopback only and are gone after stop()."""
    steady = GatewayConfig(name="s0", port=_process.free_port(), dsn=DEAD_DSN,
                           strategy="steady")
    naive = GatewayConfig(name="n0", port=_process.free_port(), dsn=DEAD_DSN, strategy="naive")
    sup_steady = Supervisor([steady], workdir=tmp_path, probe_interval=0.5, initial_delay=5.0)
    sup_naive = Supervisor([naive], workdir=tmp_path, probe_interval=0.5, initial_delay=5.0)
    try:
        sup_steady.start()
        sup_naive.start()
        deadline = time.monotonic() + 40
        while sup_naive.restarts() < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sup_naive.restarts() >= 1
        assert sup_steady.restarts() == 0
        assert sup_steady.ready_ports() == []
        assert _listening_addresses(steady.port) == {"0100007F"}
    finally:
        sup_steady.stop()
        sup_naive.stop()
    assert sup_steady.pids and sup_naive.pids
    assert not [pid for pid in sup_steady.pids + sup_naive.pids if _alive(pid)]


SHORT = {"duration": 25.0, "long_query_for": 15.0, "orgs": 5000, "log_rows": 50_000}


@pytest.mark.lab
@pytest.mark.slow
def test_shortened_run_naive_outage_steady_held(tmp_path):
    """25 s each, log query 15 s: naive ends in an outage with restarts, sessions left
    behind until PostgreSQL refuses connections, and the migration applied only after the
    log query ended; steady holds with no restart, >= 99 % of
    uncached lookups answered, failures never longer than the lock_timeout, no session left
    behind, and the migration applied once the log query was stopped, its blocker named."""
    result = run_lock_queue(LockQueueConfig(**SHORT))
    naive, steady = result.runs
    assert (naive.strategy, steady.strategy) == ("naive", "steady")
    assert naive.verdict == "outage", naive.totals
    assert naive.restarts >= 3
    assert naive.totals["peak_left_behind"] > 0
    assert naive.totals["peak_sessions"] > 3 * 10
    assert naive.connections_exhausted and naive.totals["connections_refused"] > 0
    long_end = max(end for _, end in naive.long_queries)
    assert not naive.migration.applied or naive.migration.applied_at_s >= long_end - 0.5

    assert steady.verdict == "held", steady.totals
    assert steady.restarts == 0
    assert steady.totals["answered_share"]["uncached"] >= 0.99
    assert steady.totals["uncached_failing_seconds_longest"] <= 1
    assert steady.totals["peak_left_behind"] == 0
    assert not steady.connections_exhausted
    assert steady.migration.applied and steady.migration.blocker_named
    assert steady.migration.tries >= 2
    assert steady.migration.applied_at_s >= 8.0
    assert not [pid for run in result.runs for pid in run.pids if _alive(pid)]

    # The same run's JSON makes a report page with both verdicts and both charts each.
    data = tmp_path / "lock-queue.json"
    data.write_text(json.dumps(result.to_json()))
    html = build_report([str(data)], tmp_path / "index.html").read_text()
    assert html.count('<svg class="chart"') == 4
    assert "outage" in html and "held" in html and "replica restarted" in html


def _ours(directory: Path) -> list[int]:
    """Processes whose working directory or command line is under ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if state != "Z" and (cwd.startswith(str(directory)) or str(directory) in cmd):
            found.append(int(entry.name))
    return found


@pytest.mark.lab
def test_ctrl_c_leaves_nothing_running(labdir):
    """Ctrl-C in the middle of a run stops every replica and PostgreSQL: exit 130."""
    proc = subprocess.Popen(
        [*PGSTEADY, "lab", "lock-queue", "--strategy", "naive", "--duration", "30s",
         "--deploy-at", "1s", "--long-query-at", "0.5s", "--long-query-for", "20s",
         "--dir", str(labdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(labdir.glob("*/lq_naive_1-*/"
                                                                        "replica-r0-v2.log")):
            time.sleep(0.2)
        assert list(labdir.glob("*/lq_naive_1-*/replica-r0-v2.log")), "never deployed"
        assert _ours(labdir)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert _ours(labdir) == []


@pytest.mark.lab
def test_a_failed_run_leaves_nothing_running(labdir, monkeypatch):
    """When the run fails half-way, the error surfaces and every process is gone."""
    async def broken(self):
        await __import__("asyncio").sleep(1)
        raise RuntimeError("load generator broke")

    monkeypatch.setattr(lock_queue.LoadGenerator, "run", broken)
    config = LockQueueConfig(strategies=("naive",), orgs=1000, log_rows=1000)
    with pytest.raises(RuntimeError, match="load generator broke"):
        run_lock_queue(config, base_dir=str(labdir))
    assert _ours(labdir) == []


def test_refusals_are_read_from_the_server_log_in_run_seconds():
    """Both ways PostgreSQL refuses a connection for lack of slots count, placed on the run's
    clock; other FATALs do not."""
    log = ("2026-10-19 18:00:01.500 UTC [7] FATAL:  sorry, too many clients already\n"
           "2026-10-19 18:00:02.250 UTC [8] FATAL:  remaining connection slots are reserved "
           "for non-replication superuser connections\n"
           "2026-10-19 18:00:03.000 UTC [9] FATAL:  password authentication failed\n")
    epoch0 = 1792432800.0  # 2026-10-19 18:00:00 UTC
    assert lock_queue.refusals(log, epoch0) == [1.5, 2.25]
