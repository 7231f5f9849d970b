"""`pgsteady probe`: the synthetic check that needs the database, run as a cron job would
run it, its metrics read back, and the paging rule fired on them by promtool."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from pgsteady.inspect.alerts import RULES, RUNBOOK, AlertConfig, prometheus_rules

PGSTEADY = [sys.executable, "-m", "pgsteady"]


def probe(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PGSTEADY_DSN"}
    return subprocess.run([*PGSTEADY, "probe", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env=env)


def samples(text: str) -> dict[str, float]:
    """``metric{labels}`` -> value, from Prometheus' text format."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            found[series] = float(value)
    return found


def test_database_check_through_pgbouncer_succeeds(pgsteady_stack, pgsteady_database):
    """Through PgBouncer in transaction mode: exit 0, success 1 with its probe and check
    labels, a duration and a current timestamp."""
    cluster = pgsteady_stack(pool_size=2)
    done = probe("--dsn", cluster.pooled_dsn(pgsteady_database.name), "--name", "orders")
    assert done.returncode == 0, done.stderr
    got = samples(done.stdout)
    assert got['pgsteady_probe_success{probe="orders",check="database"}'] == 1.0
    assert 0 < got['pgsteady_probe_duration_seconds{probe="orders",check="database"}'] < 5
    assert abs(got['pgsteady_probe_last_run_timestamp_seconds{probe="orders",check="database"}']
               - time.time()) < 60


def test_stalled_database_fails_within_its_deadline_and_writes_zero(
        pgsteady_database, pgsteady_lock_holder, tmp_path):
    """A query on a table another session locks: exit 1 within the 1 s deadline (plus
    start-up), success 0 in the metrics file, one line on stderr saying why."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table orders (id int)")
    pgsteady_lock_holder(pgsteady_database.dsn, "orders", "ACCESS EXCLUSIVE")
    out = tmp_path / "probe.prom"
    start = time.monotonic()
    done = probe("--dsn", pgsteady_database.dsn, "--query", "select count(*) from orders",
                 "--deadline", "1s", "--metrics-file", str(out))
    assert done.returncode == 1
    assert time.monotonic() - start < 10
    assert done.stdout == ""
    assert samples(out.read_text())['pgsteady_probe_success{probe="database",check="database"}'] == 0
    assert len(done.stderr.strip().splitlines()) == 1 and "statement timeout" in done.stderr


def test_unreachable_database_is_exit_3_and_no_password(tmp_path):
    """Nothing listening: exit 3, success 0 on stdout, one stderr line without the password."""
    done = probe("--dsn", "host=127.0.0.1 port=1 user=u password=hunter2 dbname=x",
                 "--deadline", "2s")
    assert done.returncode == 3
    assert samples(done.stdout)['pgsteady_probe_success{probe="database",check="database"}'] == 0
    assert "hunter2" not in done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("args", "complaint"), [
    ((), "needs --dsn"),
    (("--url", "ftp://x/health/deep"), "not an http(s) URL"),
    (("--url", "http://127.0.0.1:1/", "--metrics-file", "/no/such/dir/p.prom"),
     "not a file in an existing folder"),
    (("--url", "http://127.0.0.1:1/", "--deadline", "0"), "must be more than 0"),
])
def test_usage_errors_are_one_line_and_exit_2(args, complaint):
    """Nothing to check, a non-HTTP URL, a metrics file in a missing folder, a zero deadline:
    one line naming it, exit 2, nothing checked."""
    done = probe(*args)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and complaint in done.stderr


@pytest.fixture
def health_server() -> Iterator[dict]:
    """A local HTTP server whose /health/deep answers the status the test sets."""
    state = {"status": 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(state["status"])
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/health/deep"
    yield state
    server.shutdown()
    server.server_close()


def test_deep_health_check_probe(health_server):
    """--url: a 200 is success 1 (exit 0) with check="http"; a 503 is success 0 (exit 1)."""
    done = probe("--url", health_server["url"], "--name", "api-deep")
    assert done.returncode == 0, done.stderr
    assert samples(done.stdout)['pgsteady_probe_success{probe="api-deep",check="http"}'] == 1
    health_server["status"] = 503
    done = probe("--url", health_server["url"], "--name", "api-deep")
    assert done.returncode == 1 and "HTTP 503" in done.stderr
    assert samples(done.stdout)['pgsteady_probe_success{probe="api-deep",check="http"}'] == 0


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool")
def test_a_failed_probe_fires_the_synthetic_check_rule(tmp_path):
    """The metrics a failing probe wrote, scraped (with instance/job), fire
    PgsteadySyntheticCheckFailed under promtool with the probe's name."""
    done = probe("--dsn", "host=127.0.0.1 port=1 dbname=x user=u", "--name", "orders",
                 "--deadline", "2s")
    value = samples(done.stdout)['pgsteady_probe_success{probe="orders",check="database"}']
    rule = next(r for r in RULES if r.alert == "PgsteadySyntheticCheckFailed")
    (tmp_path / "rules.yml").write_text(prometheus_rules(AlertConfig()))
    (tmp_path / "tests.yml").write_text(json.dumps({
        "rule_files": ["rules.yml"], "evaluation_interval": "30s", "tests": [{
            "interval": "1m",
            "input_series": [{"series": 'pgsteady_probe_success{probe="orders", '
                                        'check="database", instance="cron", job="probe"}',
                              "values": f"{value:g}x10"}],
            "alert_rule_test": [{"eval_time": "2m", "alertname": "PgsteadySyntheticCheckFailed",
                                 "exp_alerts": [{"exp_labels": {
                                     "probe": "orders", "instance": "cron", "job": "probe",
                                     "severity": "critical"}, "exp_annotations": {
                                     "summary": "orders: the synthetic database check failed",
                                     "description": rule.description,
                                     "runbook": f"Run: {rule.run}. See {RUNBOOK}.",
                                     "runbook_url": AlertConfig().runbook_url(rule)}}]}]}]}))
    check = subprocess.run(["promtool", "test", "rules", "tests.yml"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-2000:]


def test_listen_runs_the_check_on_each_scrape(pgsteady_database):
    """--listen serves /metrics (blackbox-exporter style): each scrape runs the check (a new
    timestamp), another path is 404, and SIGTERM stops it with exit 0."""
    import re
    import signal
    import urllib.error
    import urllib.request

    env = {k: v for k, v in os.environ.items() if k != "PGSTEADY_DSN"}
    proc = subprocess.Popen([*PGSTEADY, "probe", "--dsn", pgsteady_database.dsn, "--name", "db",
                             "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        line = proc.stderr.readline() if proc.stderr else ""
        port = int(re.search(r"127\.0\.0\.1:(\d+)/metrics", line)[1])  # type: ignore[index]
        stamps = []
        for _ in range(2):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20) as r:
                got = samples(r.read().decode())
            assert got['pgsteady_probe_success{probe="db",check="database"}'] == 1
            stamps.append(got['pgsteady_probe_last_run_timestamp_seconds{probe="db",'
                              'check="database"}'])
            time.sleep(0.05)
        assert stamps[1] > stamps[0]
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=20)
        assert info.value.code == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        if proc.stderr:
            proc.stderr.close()
