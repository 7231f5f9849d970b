"""The seed's paging list, rule by rule (issue 40 items 6-7): client pools per replica, the
database host's CPU, pool timeouts, the deep health check and the synthetic check — each
under promtool's own rule-test engine, and client pools also in-process."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from pgsteady.inspect.alerts import AlertConfig, prometheus_rules
from pgsteady.inspect.evaluate import Evaluator

needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                    reason="needs promtool (Debian's prometheus package)")


def _fired(tmp_path, input_series: list[dict], alert: str, eval_time: str) -> list[dict]:
    """What promtool says ``alert`` fires with at ``eval_time``: a list of label sets."""
    (tmp_path / "rules.yml").write_text(prometheus_rules(AlertConfig()))
    # An empty expectation: promtool's failure message lists what did fire.
    (tmp_path / "tests.yml").write_text(json.dumps({
        "rule_files": ["rules.yml"], "evaluation_interval": "30s",
        "tests": [{"interval": "1m", "input_series": input_series,
                   "alert_rule_test": [{"eval_time": eval_time, "alertname": alert,
                                        "exp_alerts": []}]}]}))
    done = subprocess.run(["promtool", "test", "rules", "tests.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode == 0:
        return []
    got = (done.stdout + done.stderr).split("got:", 1)[1]
    found = []
    for line in got.splitlines():
        if "Labels:{" in line:
            body = line.split("Labels:{", 1)[1].split("}", 1)[0]
            found.append(dict(part.split("=", 1) for part in body.split(", ")))
    assert found, done.stdout[-3000:]
    return [{k: v.strip('"') for k, v in labels.items()} for labels in found]


POOL = 'service="api", database="main", job="api"'


@needs_promtool
def test_one_saturated_pod_beside_an_idle_one_pages_with_its_instance(tmp_path):
    """Pod a's client pool at 100 % for 8 minutes, pod b's idle: PgsteadyClientPoolSaturated
    fires for pod a (averaged over the service it was 50 % and nothing fired)."""
    series = [
        {"series": f'pgsteady_client_pool_in_use{{instance="pod-a", {POOL}}}', "values": "4x10"},
        {"series": f'pgsteady_client_pool_size{{instance="pod-a", {POOL}}}', "values": "4x10"},
        {"series": f'pgsteady_client_pool_in_use{{instance="pod-b", {POOL}}}', "values": "0x10"},
        {"series": f'pgsteady_client_pool_size{{instance="pod-b", {POOL}}}', "values": "4x10"},
    ]
    fired = _fired(tmp_path, series, "PgsteadyClientPoolSaturated", "8m")
    assert [f["instance"] for f in fired] == ["pod-a"]
    assert fired[0]["service"] == "api" and fired[0]["database"] == "main"


def test_one_saturated_pod_pages_in_process_too():
    """The in-process evaluator (pgsteady watch) agrees: pod a firing after 5 minutes at
    100 %, pod b never active."""
    ev = Evaluator()
    def pods(a: float, b: float) -> dict:
        def key(pod: str) -> tuple:
            return (("instance", pod), ("job", "api"), ("service", "api"), ("database", "main"))
        return {"pgsteady_client_pool_in_use": [(key("pod-a"), a), (key("pod-b"), b)],
                "pgsteady_client_pool_size": [(key("pod-a"), 4.0), (key("pod-b"), 4.0)]}
    for t in range(0, 481, 30):
        evaluation = ev.update(pods(4.0, 0.0), float(t))
    active = [a for a in evaluation.active if a.alert == "PgsteadyClientPoolSaturated"]
    assert [(dict(a.labels)["instance"], a.state) for a in active] == [("pod-a", "firing")]


@needs_promtool
def test_database_cpu_over_90_percent_pages_per_host(tmp_path):
    """node_exporter's idle CPU seconds on two 2-CPU hosts: the database host 98 % busy for
    15 minutes pages with its instance; the idle host does not; other modes are ignored."""
    def cpu(host: str, n: int, mode: str, per_minute: float) -> dict:
        return {"series": f'node_cpu_seconds_total{{instance="{host}", job="node", cpu="{n}", '
                          f'mode="{mode}"}}', "values": f"0+{per_minute:g}x30"}
    series = [cpu("db-1", 0, "idle", 1.2), cpu("db-1", 1, "idle", 1.2),
              cpu("db-1", 0, "user", 58.8), cpu("db-2", 0, "idle", 60), cpu("db-2", 1, "idle", 54)]
    fired = _fired(tmp_path, series, "PgsteadyDatabaseCpuHigh", "20m")
    assert [(f["instance"], f["job"]) for f in fired] == [("db-1", "node")]
    assert _fired(tmp_path, series, "PgsteadyDatabaseCpuHigh", "8m") == []  # `for` is 10m


@needs_promtool
def test_pool_timeouts_page_on_queued_deadlines_only(tmp_path):
    """Deadlines that pass while waiting for a pool connection (phase queued) page as pool
    timeouts, with the replica and the pool; deadlines on running queries do not."""
    def exceeded(pod: str, phase: str, per_minute: int) -> dict:
        return {"series": f'pgsteady_client_deadline_exceeded_total{{instance="{pod}", {POOL}, '
                          f'phase="{phase}"}}', "values": f"0+{per_minute}x20"}
    series = [exceeded("pod-a", "queued", 5), exceeded("pod-b", "running", 50)]
    fired = _fired(tmp_path, series, "PgsteadyClientPoolTimeouts", "12m")
    assert [(f["instance"], f["database"]) for f in fired] == [("pod-a", "main")]


@needs_promtool
def test_probe_rules_tell_the_synthetic_check_from_the_deep_health_check(tmp_path):
    """`pgsteady probe` results: a failed database check pages at once as the synthetic
    check; a failed HTTP deep health check pages after 3 minutes as the deep check; a probe
    that stopped writing results (timestamp 20 minutes old) warns as stale."""
    def probe(name: str, check: str, values: str) -> dict:
        return {"series": f'pgsteady_probe_success{{instance="cron", job="probe", '
                          f'probe="{name}", check="{check}"}}', "values": values}
    series = [probe("orders-db", "database", "1 1 0 0 0 0 0"),
              probe("api-deep", "http", "1 0 0 0 0 0 0"),
              {"series": 'pgsteady_probe_last_run_timestamp_seconds{instance="cron", '
                         'job="probe", probe="orders-db"}', "values": "0x30"}]
    assert [f["probe"] for f in _fired(tmp_path, series, "PgsteadySyntheticCheckFailed",
                                       "2m")] == ["orders-db"]
    assert _fired(tmp_path, series, "PgsteadyDeepHealthFailing", "3m") == []
    assert [f["probe"] for f in _fired(tmp_path, series, "PgsteadyDeepHealthFailing",
                                       "5m")] == ["api-deep"]
    assert [f["probe"] for f in _fired(tmp_path, series, "PgsteadySyntheticCheckStale",
                                       "20m")] == ["orders-db"]


def test_selector_keeps_only_matching_series_in_process():
    """In-process, the pool-timeout rule counts only queued/connecting deadlines: 50 a
    minute on running queries leave it quiet, 5 a minute queued make it active."""
    ev = Evaluator()
    base = (("instance", "pod-a"), ("job", "api"), ("service", "api"), ("database", "main"))
    metric = "pgsteady_client_deadline_exceeded_total"
    for t, (queued, running) in enumerate([(0, 0), (5, 50), (10, 100)]):
        evaluation = ev.update({metric: [((*base, ("phase", "queued")), float(queued)),
                                         ((*base, ("phase", "running")), float(running))]},
                               t * 60.0)
    [active] = [a for a in evaluation.active if a.alert == "PgsteadyClientPoolTimeouts"]
    assert active.value == 5
    quiet = Evaluator()
    for t, running in enumerate([0, 50, 100]):
        evaluation = quiet.update({metric: [((*base, ("phase", "running")), float(running))]},
                                  t * 60.0)
    assert "PgsteadyClientPoolTimeouts" not in [a.alert for a in evaluation.active]
