"""The lock-queue lab's renderers: tables, the JSON shape the issue fixed, charts, and the
HTML report reading that JSON — from a made-up result, no database."""

from __future__ import annotations

import json

from lab_data import lock_queue_result as _result
from rich.console import Console

from pgsteady.lab.scenarios import lock_queue_report as report
from pgsteady.report.build import build_report

CLASSES = ("cached", "uncached", "dashboard")


def test_tables_render_verdicts_and_refusals():
    """The summary shows each verdict, the refused connections and the migration; the
    per-second table shows ok/failed/timed out per class."""
    result = _result()
    console = Console(record=True, width=250, color_system=None)
    console.print(report.summary_table(result))
    console.print(report.per_second_table(result.runs[0]))
    text = console.export_text()
    assert "outage" in text and "held" in text
    assert "yes: 2 refused from 7 s" in text
    assert "applied at 11.0s (5 tries)" in text
    assert "0/10/0" in text


def test_json_has_the_issue_s_shape(tmp_path):
    """schema_version 1, scenario lock-queue, and per run the fields the issue lists."""
    path = tmp_path / "lock-queue.json"
    report.write_json(_result(), path)
    data = json.loads(path.read_text())
    assert (data["schema_version"], data["scenario"]) == (1, "lock-queue")
    run = data["runs"][0]
    assert {"strategy", "run", "verdict", "connections_exhausted", "restarts", "migration",
            "per_second", "totals"} <= set(run)
    assert set(run["migration"]) >= {"applied", "applied_at_s", "tries", "blocker_named"}
    second = run["per_second"][0]
    assert {"t", "ok", "failed", "p99_ms", "sessions", "queued_on_lock", "lock_queue_orgs",
            "restarts", "replicas_ready"} <= set(second)
    assert set(second["ok"]) == set(CLASSES)


def test_charts_and_the_html_report(tmp_path):
    """One PNG per strategy plus the side-by-side one; `pgsteady report` reads the JSON."""
    result = _result()
    written = report.write_charts(result, tmp_path)
    assert [p.name for p in written] == ["lock-queue.png", "lock-queue-naive.png",
                                         "lock-queue-steady.png"]
    assert all(p.stat().st_size > 10_000 for p in written)
    report.write_json(result, tmp_path / "lock-queue.json")
    page = build_report([str(tmp_path / "lock-queue.json")], tmp_path / "index.html")
    assert "lock" in page.read_text()
