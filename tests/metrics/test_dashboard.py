"""The Grafana dashboard (`pgsteady alerts --format grafana`) is generated from pgsteady's
metric definitions: every panel queries a metric the reference documents and the code
exports, every documented metric has a panel, and every query parses as PromQL."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pgsteady.inspect import probe
from pgsteady.inspect.dashboard import ALL_METRICS, CLIENT_METRICS, MIGRATION_METRICS

PGSTEADY = [sys.executable, "-m", "pgsteady"]
REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "metrics.md"


def documented() -> set[str]:
    """Metric names in the reference's tables (first column)."""
    return set(re.findall(r"^\| `(pgsteady_\w+)` \|", REFERENCE.read_text(), re.M))


def dashboard() -> dict:
    done = subprocess.run([*PGSTEADY, "alerts", "--format", "grafana"], capture_output=True,
                          text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def queried(board: dict) -> dict[str, set[str]]:
    """Panel title -> the metric names its queries name."""
    return {panel["title"]: {name for target in panel["targets"]
                             for name in re.findall(r"\b(pgsteady_\w+)", target["expr"])}
            for panel in board["panels"] if panel["type"] != "row"}


def test_every_panel_queries_a_documented_metric_and_every_metric_has_a_panel():
    """No panel names a metric the reference does not list (a typo, a renamed metric), and
    each metric in docs/reference/metrics.md — pools, deadlines, lock queue, PgBouncer refill,
    migrations, probes — has a panel."""
    board = dashboard()
    names = documented()
    assert len(names) >= 35
    panels = queried(board)
    for title, metrics in panels.items():
        assert metrics, title
        assert metrics <= names, (title, metrics - names)
    shown = set().union(*panels.values())
    assert names <= shown, names - shown
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    for concern in ("Client pools", "Deadlines", "PgBouncer", "Migrations", "lock queue"):
        assert any(concern in row for row in rows), concern


def test_dashboard_model_is_consistent():
    """Unique panel ids, panels inside the 24-column grid and not overlapping, every target on
    the datasource variable."""
    board = dashboard()
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, panel["title"]
                cells.add((x, y))
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}"
    assert board["templating"]["list"][0]["type"] == "datasource"


def _families(text: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """name -> (type, labels) from Prometheus' text format (counters named with _total)."""
    kinds = dict(re.findall(r"^# TYPE (\w+) (\w+)$", text, re.M))
    found = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = re.match(r"^(\w+?)(_total|_created)?(\{[^}]*\})? ", line)
        assert m, line
        if m[2] == "_created":
            continue
        base = m[1] + (m[2] or "")
        kind = kinds.get(m[1]) or kinds.get(base)
        labels = tuple(sorted(re.findall(r'(\w+)="', m[3] or "")))
        found[base] = (kind, labels)
    return found


def test_client_metrics_are_what_instrument_exports():
    """The dashboard's client metric list equals what pgsteady.metrics.instrument exports
    for a Database: names, types and labels."""
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry, generate_latest

    from pgsteady import Database
    from pgsteady.metrics import instrument

    registry = CollectorRegistry()
    db = Database("host=127.0.0.1 port=1 dbname=x", pool_size=1, service="api", open=False)
    instrument(db, registry, name="main")
    got = _families(generate_latest(registry).decode())
    assert got == {m.name: (m.kind, tuple(sorted(m.labels))) for m in CLIENT_METRICS}


def test_migration_and_probe_metrics_are_what_their_writers_write(tmp_path):
    """The dashboard's migration metrics are what `migrate --metrics-file` writes, and its
    probe metrics what `pgsteady probe` prints."""
    pytest.importorskip("prometheus_client")
    from pgsteady.migrate.textfile import write_run

    path = tmp_path / "m.prom"
    write_run(path, success=True, seconds=1.0, tries=1, pending=0, applied=2)
    got = _families(path.read_text())
    assert got == {m.name: (m.kind, m.labels) for m in MIGRATION_METRICS}
    result = probe.ProbeResult("db", "database", True, 0.1, 1.0)
    assert set(_families(probe.exposition([result]))) == {
        m.name for m in ALL_METRICS if m.name.startswith("pgsteady_probe_")}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool")
def test_every_panel_query_parses_as_promql(tmp_path):
    """Each panel's query, as a recording rule ($__rate_interval as 5m), passes promtool."""
    board = dashboard()
    rules = [{"record": f"pgsteady_dashboard:panel{p['id']}",
              "expr": t["expr"].replace("$__rate_interval", "5m")}
             for p in board["panels"] for t in p.get("targets", [])]
    path = tmp_path / "queries.yml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    check = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True,
                           text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(rules)} rules found" in check.stdout
