"""End to end: a real Prometheus scrapes `pgsteady exporter` on the lab cluster with the rules
`pgsteady alerts` generates, and fires PgsteadyLockQueue during seed 002's lock queue."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_doctor_seed import seed_scene  # noqa: F401  (a fixture)

from pgsteady.inspect.alerts import AlertConfig, prometheus_rules

needs_prometheus = pytest.mark.skipif(shutil.which("prometheus") is None,
                                      reason="needs prometheus (Debian's prometheus package)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _running(argv: list[str], log: Path) -> Iterator[subprocess.Popen[str]]:
    """A process whose output goes to ``log``, stopped (TERM, then KILL) on every exit path."""
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)


def _exporter_port(log: Path, proc: subprocess.Popen[str], timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        match = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", log.read_text())
        if match:
            return int(match[1])
        time.sleep(0.1)
    raise AssertionError(f"the exporter did not start: {log.read_text()}")


def _alerts(port: int) -> list[dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/alerts", timeout=5) as r:
            return list(json.load(r)["data"]["alerts"])
    except OSError:
        return []  # not up yet


@needs_prometheus
def test_prometheus_fires_the_lock_queue_alert(seed_scene, pgsteady_stack,  # noqa: F811
                                               tmp_path):
    """With the lock queue's `for` shortened to 2 s, Prometheus (1 s scrapes and evaluations)
    reports PgsteadyLockQueue firing for public.orgs through /api/v1/alerts."""
    lab = pgsteady_stack(pool_size=2)
    exporter_log = tmp_path / "exporter.log"
    exporter = [sys.executable, "-m", "pgsteady", "exporter", "--dsn", seed_scene["dsn"],
                "--pgbouncer", lab.admin_dsn, "--listen", "127.0.0.1:0",
                "--scrape-timeout", "0.8s"]
    rules = tmp_path / "rules.yml"
    rules.write_text(prometheus_rules(AlertConfig.of({"lock_queue_length_for": "2s"})))
    with _running(exporter, exporter_log) as proc:
        target = _exporter_port(exporter_log, proc)
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files: [{json.dumps(str(rules))}]\n"
            "scrape_configs:\n  - job_name: pgsteady\n    scrape_timeout: 1s\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{target}']}}]\n")
        port = _free_port()
        prometheus = ["prometheus", f"--config.file={config}",
                      f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                      f"--web.listen-address=127.0.0.1:{port}"]
        with _running(prometheus, tmp_path / "prometheus.log"):
            deadline = time.monotonic() + 45
            firing: list[dict] = []
            while time.monotonic() < deadline and not firing:
                firing = [a for a in _alerts(port) if a["labels"]["alertname"]
                          == "PgsteadyLockQueue" and a["state"] == "firing"]
                time.sleep(0.5)
            assert firing, (tmp_path / "prometheus.log").read_text()[-2000:]
            assert firing[0]["labels"]["relation"] == "public.orgs"
            assert firing[0]["labels"]["severity"] == "critical"
            assert float(firing[0]["value"]) >= 20
            assert "pgsteady blockers" in firing[0]["annotations"]["runbook"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
