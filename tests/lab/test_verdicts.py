"""One verdict vocabulary: a run reads the same in the terminal, the PNG, the HTML page, the
JSON and `sim validate`, in the same colour; a ceiling below what a run achieved is explained
wherever the share is shown."""

from __future__ import annotations

import json

import matplotlib
import pytest
from lab_data import pool_drain_result as _result
from lab_data import pool_drain_run as _run
from rich.console import Console

from pgsteady import _verdicts
from pgsteady.lab.scenarios import pool_drain_report as report
from pgsteady.lab.scenarios.pool_drain import PoolDrainResult, RunResult
from pgsteady.report.build import build_report
from pgsteady.sim.report import validation_table
from pgsteady.sim.validate import QUICK, Cell, Validation, side

matplotlib.use("Agg")


def _text(renderable: object, width: int = 200) -> str:
    with open("/dev/null", "w") as sink:
        console = Console(width=width, no_color=True, record=True, file=sink)
        console.print(renderable)
        return console.export_text()


def _png_title(result: PoolDrainResult, run: RunResult) -> tuple[str, str, list[str]]:
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    fig, ax = plt.subplots()
    try:
        report._draw(ax, result, run)
        title = ax.title
        return title.get_text(), to_hex(title.get_color()), ax.get_legend_handles_labels()[1]
    finally:
        plt.close(fig)


def test_one_run_reads_the_same_in_every_view(tmp_path):
    """A steady run with a few timed-out callers is "recovered" in the table, the per-second
    title, the PNG title, the JSON, the HTML badge and sim validate, in one colour."""
    result = _result()
    steady = result.runs[1]
    assert steady.verdict == "recovered"
    summary = _text(report.summary_table(result))
    assert "steady: recovered 1/1" in summary and "naive: collapsed 1/1" in summary
    assert "held" not in summary.split("naive: collapsed")[0]
    assert "(recovered)" in _text(report.per_second_table(steady, result.pgbench_tps))
    title, colour, _ = _png_title(result, steady)
    assert title.startswith("steady: recovered") and colour == _verdicts.colour("recovered")
    assert f"[{_verdicts.colour('recovered')}]recovered[/]" == report.verdict_text(steady)
    path = tmp_path / "pool-drain.json"
    report.write_json(result, path)
    assert [r["verdict"] for r in json.loads(path.read_text())["runs"]] == \
        ["collapsed", "recovered"]
    page = build_report([str(path)], tmp_path / "index.html").read_text()
    assert 'class="badge good"><span aria-hidden="true">✓</span> recovered' in page
    assert 'class="badge bad"><span aria-hidden="true">✗</span> collapsed' in page
    cell = Cell(4, 0.05, 0.0, "steady", 700.0, 0.0005, lab=side([steady]), model=side([steady]))
    validate = _text(validation_table(Validation(QUICK, cells=[cell])))
    assert "recovered 1/1" in validate and "0/1" not in validate


def test_held_and_recovered_agree_in_sim_validate():
    """held against recovered is agreement (both: the pool was back); the shown count is the
    runs with that outcome, not the collapsed runs."""
    held = _run("steady", [650] * 15, [0] * 15)
    recovered = _run("steady", [650] * 15, [0] * 5 + [3] * 5 + [0] * 5)
    lab, model = side([held, held, recovered]), side([recovered])
    assert (lab.verdict, lab.verdict_runs, lab.runs) == ("held", 3, 3)
    assert (model.verdict, model.verdict_runs) == ("recovered", 1)
    assert Cell(4, 0.05, 0.0, "steady", 700.0, 0.0005, lab=lab, model=model).verdicts_agree
    down = _run("naive", [650] * 5 + [0] * 10, [0] * 15)
    assert not Cell(4, 0.05, 0.0, "naive", 700.0, 0.0005, lab=side([down]),
                    model=model).verdicts_agree


@pytest.mark.parametrize("word", ["held", "recovered", "degraded", "collapsed", "outage",
                                  "passed", "failed"])
def test_each_word_has_one_meaning_tone_and_colour(word):
    """Every word the views print has a meaning and one colour, the tone's."""
    v = _verdicts.of(word)
    assert v.meaning and v.colour == _verdicts.COLOURS[v.tone]
    assert _verdicts.of("from-a-newer-file").tone == "warn"


def test_a_low_ceiling_is_noted_wherever_the_share_is_shown(tmp_path):
    """steady at 143 % of a ceiling measured low: the terminal tables, the PNG legend and the
    HTML page each say the ceiling was low, not that steady beat the database."""
    result = _result(ceiling=455.0)  # 650 / 455 = 143 %
    steady = result.runs[1]
    summary = _text(report.summary_table(result))
    assert "143%†" in summary and "pgbench's ceiling measured low" in summary
    per_second = _text(report.per_second_table(steady, result.pgbench_tps))
    assert "143%†" in per_second and "the machine's speed drifted" in per_second
    assert any("measured low" in label for label in _png_title(result, steady)[2])
    path = tmp_path / "pool-drain.json"
    report.write_json(result, path)
    page = build_report([str(path)], tmp_path / "index.html").read_text()
    assert "143%†" in page and "pgbench&#x27;s ceiling measured low" in page
    normal = _text(report.summary_table(_result()))
    assert "†" not in normal and "measured low" not in normal


def test_only_a_share_above_100_percent_carries_the_low_ceiling_mark(tmp_path):
    """A run whose ceiling measured low (mean 103 %) can still have a 96 % second: that cell
    is shown plain, in the terminal and on the page; the 103 % mean keeps the mark."""
    steady = _run("steady", [650] * 5 + [600] + [650] * 9, [0] * 15)  # ceiling 625: 96 % worst
    result = PoolDrainResult(_result().config, 625.0, [steady], {})
    summary = _text(report.summary_table(result))
    assert "96%" in summary and "†" not in summary  # no marked cell: no note either
    path = tmp_path / "pool-drain.json"
    report.write_json(result, path)
    page = build_report([str(path)], tmp_path / "index.html").read_text()
    assert "96%" in page and "96%†" not in page and "103%†" in page  # worst, mean


def test_the_page_and_the_docs_define_every_verdict_word(tmp_path):
    """Each verdict word the page can show is defined beside it, and in docs/lab.md, with the
    vocabulary's own meaning (and the page no longer says "held" of a recovered run)."""
    from html import escape
    from pathlib import Path

    path = tmp_path / "pool-drain.json"
    report.write_json(_result(), path)
    page = build_report([str(path)], tmp_path / "index.html").read_text()
    docs = (Path(__file__).resolve().parents[2] / "docs" / "lab.md").read_text()
    for v in _verdicts.POOL_DRAIN:
        assert escape(v.meaning) in page, v.word
        assert f"**{v.word}**: {v.meaning}" in docs, v.word
    for v in (*_verdicts.LOCK_QUEUE, _verdicts.PASSED, _verdicts.FAILED):
        assert f"**{v.word}**: {v.meaning}" in docs, v.word
    assert "(<em>held</em>, or <em>recovered</em>" in page
