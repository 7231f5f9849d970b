"""Rendering pool-drain results: tables, captions, charts and the JSON file."""

from __future__ import annotations

import json

from rich.console import Console

from pgsteady.lab.scenarios import pool_drain_report as report
from pgsteady.lab.scenarios.pool_drain import (
    PoolDrainConfig,
    PoolDrainResult,
    RunResult,
    verdict,
)


def _run(strategy: str, index: int, answered: list[int]) -> RunResult:
    rows = [{"t": t, "answered": a, "timeouts": 0 if a else 50, "rejected": 0,
             "db_completions": a, "server_connections_opened": 0 if a else 18,
             "not_ready_closures": 0 if a else 18, "cl_waiting": 0, "sv_active": 4.0,
             "sv_login": 0.0} for t, a in enumerate(answered)]
    collapsed, recovered = verdict(answered)
    totals = {k: sum(r[k] for r in rows) for k in rows[0] if k != "t"}
    return RunResult(strategy, index, collapsed, recovered, rows, totals)


def _result() -> PoolDrainResult:
    config = PoolDrainConfig(duration=30.0, burst_start=5.0, burst_end=10.0)
    runs = [_run("naive", 1, [700] * 5 + [0] * 25), _run("naive", 2, [700] * 5 + [0] * 25),
            _run("steady", 1, [650] * 30), _run("steady", 2, [650] * 30)]
    return PoolDrainResult(config, 700.0, runs, {"pgbouncer": "PgBouncer 1.18.0"})


def _render(renderable) -> str:
    with open("/dev/null", "w") as sink:
        console = Console(width=250, no_color=True, record=True, file=sink)
        console.print(renderable)
        return console.export_text()


def test_summary_counts_verdicts_per_strategy():
    """The caption counts each strategy's runs by verdict, in the same words as the rows."""
    text = _render(report.summary_table(_result()))
    assert "naive: collapsed 2/2; steady: held 2/2" in text
    assert "93%" in text  # steady's worst second against the 700/s ceiling


def test_long_runs_are_condensed_but_keep_the_last_second():
    """A 30 s run shows at most ~20 rows, ending with the last second."""
    rows = report._condensed(_result().runs[0].per_second)
    assert len(rows) <= 21
    assert rows[0]["t"] == 0 and rows[-1]["t"] == 29


def test_charts_and_json_are_written(tmp_path):
    """--out writes a combined chart, one per run, and JSON with the documented keys."""
    result = _result()
    written = report.write_charts(result, tmp_path)
    names = sorted(p.name for p in written)
    assert names == ["pool-drain-naive-run2.png", "pool-drain-naive.png",
                     "pool-drain-steady-run2.png", "pool-drain-steady.png", "pool-drain.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in written)
    report.write_json(result, tmp_path / "out.json")
    document = json.loads((tmp_path / "out.json").read_text())
    assert document["ceiling"] == {"pgbench_tps": 700.0}
    assert [r["strategy"] for r in document["runs"]] == ["naive", "naive", "steady", "steady"]
    assert set(document["runs"][0]) == {"strategy", "run", "verdict", "collapsed",
                                        "recovered", "per_second", "totals"}
    assert [r["verdict"] for r in document["runs"]] == ["collapsed", "collapsed", "held", "held"]


def test_the_chart_legend_covers_no_bar(tmp_path, monkeypatch):
    """In every PNG the legend sits where no bar is: inside the axes' upper right it covered
    the rejected bars that reach the top during a burst."""
    from pgsteady.lab import charts

    result = _result()
    steady = result.runs[-1]
    for row in steady.per_second[5:10]:  # a burst's fail-fast rejections, up to the top
        row["rejected"] = 1200
    figures = []
    real_save = charts.save

    def keep(fig, path):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
        boxes = [legend.get_window_extent(renderer) for legend in legends]
        bars = [patch.get_window_extent(renderer) for ax in fig.axes for patch in ax.patches
                if patch.get_height() > 0]
        figures.append((path.name, boxes, bars, fig.bbox))
        return real_save(fig, path)

    monkeypatch.setattr(charts, "save", keep)
    report.write_charts(result, tmp_path)
    assert len(figures) == 5
    for name, boxes, bars, whole in figures:
        assert boxes, name
        for box in boxes:
            assert whole.contains(box.x0, box.y0) and whole.contains(box.x1, box.y1), name
            assert not any(box.overlaps(bar) for bar in bars), name
