"""Terminal tables at 80 and 200 columns: no cell cut to an ellipsis, every line within the
width, and a legend for the short headers (and for the columns a narrow terminal leaves out)."""

from __future__ import annotations

import pytest
from lab_data import lock_queue_result, pool_drain_result
from rich.console import Console

from pgsteady.lab.scenarios import lock_queue_report
from pgsteady.lab.scenarios import pool_drain_report as report
from pgsteady.lab.tables import Column, FitTable
from pgsteady.sim.config import SimConfig
from pgsteady.sim.phase_map import PhaseMap, parse_axis
from pgsteady.sim.report import phase_map_tables, validation_table
from pgsteady.sim.validate import QUICK, Cell, Validation, side


def _text(renderable: object, width: int) -> str:
    with open("/dev/null", "w") as sink:
        console = Console(width=width, no_color=True, record=True, file=sink)
        console.print(renderable)
        return console.export_text()


def _tables() -> dict[str, FitTable]:
    drain = pool_drain_result()
    queue = lock_queue_result()
    steady = drain.runs[1]
    cells = [Cell(4, 0.05, 0.1, run.strategy, 700.0, 0.0005, lab=side([run]),
                  model=side([run]), round_trip_p99=0.004) for run in drain.runs]
    base = SimConfig(runs=4)
    phase = PhaseMap(base, parse_axis("pool-size=2:40", 8, base),
                     parse_axis("connect-latency=5ms:200ms", 8, base),
                     {"naive": [[0.25] * 9] * 9})
    return {"pool-drain summary": report.summary_table(drain),
            "pool-drain per second": report.per_second_table(steady, drain.pgbench_tps),
            "lock-queue summary": lock_queue_report.summary_table(queue),
            "lock-queue per second": lock_queue_report.per_second_table(queue.runs[0]),
            "sim validate": validation_table(Validation(QUICK, cells=cells)),
            "phase map": phase_map_tables(phase)[0]}


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("name", list(_tables()))
def test_no_cell_is_cut_and_the_legend_is_printed(name, width):
    """Every table fits the width without an ellipsis, and each short header it shows is
    explained under it."""
    table = _tables()[name]
    text = _text(table, width)
    assert "…" not in text, text
    assert all(len(line.rstrip()) <= width for line in text.splitlines()), text
    shown = table.shown(width)
    for column in table.columns:
        if column.meaning and column.header in shown:
            assert f"{column.header} " in text and column.meaning.split()[0] in text, column


def test_at_80_columns_the_least_important_go_and_are_named():
    """The pool-drain summary keeps strategy, run, verdict and the last third at 80 columns
    and names what it left out; at 200 it shows everything."""
    table = _tables()["pool-drain summary"]
    shown = table.shown(80)
    assert shown[:3] == ["strategy", "run", "verdict"] and "ok/s last⅓" in shown
    assert "cpu s" not in shown
    text = _text(table, 80)
    assert "not shown" in text and "cpu s" in text.split("not shown")[1]
    assert "tmo" in text and "callers whose deadline passed" in text
    assert table.shown(200) == [c.header for c in table.columns]
    assert "not shown" not in _text(table, 200)


def test_a_table_too_narrow_for_its_essential_columns_folds_instead_of_cutting():
    """Columns that must stay fold their cells at a tiny width rather than end in "…"."""
    table = FitTable("t", [Column("name", justify="left"), Column("value")])
    table.add_row("a-very-long-unbreakable-name", "12345678901234567890")
    text = _text(table, 20)
    assert "…" not in text and all(len(line.rstrip()) <= 20 for line in text.splitlines())


def test_a_long_note_does_not_widen_the_output_to_the_console():
    """Piped to a file (a 200-column console), the legend's lines wrap at a paragraph's width:
    a long note used to pad every legend line to 200 columns."""
    from pgsteady.lab.tables import LEGEND_WIDTH

    table = FitTable("t", [Column("a", "the first column")],
                     notes=[("†", "a long explanation " * 20)])
    table.add_row("1")
    console = Console(width=200, no_color=True, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(table)
    lines = console.export_text().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= LEGEND_WIDTH + 4
    assert max(len(line) for line in lines) <= LEGEND_WIDTH + 4
