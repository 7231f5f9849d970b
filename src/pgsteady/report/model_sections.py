"""Sections for the model's own outputs: the phase map and the model-vs-lab validation.

Both have no per-run series, so they bring their own headline for the page's verdict table.
"""

from __future__ import annotations

from html import escape
from typing import Any

from pgsteady import _verdicts
from pgsteady.report import svg
from pgsteady.report.inputs import Result
from pgsteady.report.sections import NONE, badge, config_list, table

# The seed's setting (seed 000): where each knob sits on a phase map.
SEED = {"pool_size": 4, "connect_latency": 0.05, "deadline": 0.05, "query_time": 0.005,
        "workers": 10, "burst": 30, "burst_workers": 30, "poolers": 1}


def _knob_label(knob: str, value: Any) -> str:
    if knob in ("connect-latency", "deadline", "query-time", "query-wait-timeout",
                "think-time") and isinstance(value, (int, float)):
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:g} s"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _seed_index(knob: str, values: list[Any]) -> int | None:
    seed = SEED.get(knob.replace("-", "_"))
    if seed is None or not values:
        return None
    numeric = [v for v in values if isinstance(v, (int, float))]
    if len(numeric) != len(values):
        return None
    best = min(range(len(values)), key=lambda i: abs(float(values[i]) - seed))
    return best if abs(float(values[best]) - seed) <= 0.25 * max(abs(seed), 1e-9) else None


def _axes(result: Result) -> tuple[dict[str, Any], dict[str, Any]]:
    x, y = result.data.get("x") or {}, result.data.get("y") or {}
    return (x if isinstance(x, dict) else {}), (y if isinstance(y, dict) else {})


def _seed_cell(result: Result) -> tuple[int, int] | None:
    x, y = _axes(result)
    col = _seed_index(str(x.get("knob", "")), list(x.get("values", [])))
    row = _seed_index(str(y.get("knob", "")), list(y.get("values", [])))
    return None if col is None or row is None else (row, col)


def phase_map(result: Result, anchor: str) -> str:
    x, y = _axes(result)
    xs, ys = list(x.get("values", [])), list(y.get("values", []))
    probabilities = result.data.get("collapse_probability") or {}
    runs = result.data.get("runs")
    mark = _seed_cell(result)
    parts = [
        "<p>The model run over a grid of two knobs, every other setting as below. Each cell is "
        f"the share of {escape(str(runs))} simulated runs that collapsed (the pool never "
        "recovered after the trigger); the number in the cell is that share in percent, "
        "so the shading is never the only cue."
        + (" The outlined cell is the outage's setting." if mark else "") + "</p>",
        config_list(result.data.get("config", {}), skip=("strategies",)),
    ]
    for strategy, grid in probabilities.items():
        chart = svg.Heatmap(
            title=f"{strategy}: probability of collapse by {x.get('knob')} and {y.get('knob')}",
            x_label=str(x.get("knob", "x")), y_label=str(y.get("knob", "y")),
            x_values=[_knob_label(str(x.get("knob")), v) for v in xs],
            y_values=[_knob_label(str(y.get("knob")), v) for v in ys],
            values=grid, mark=mark)
        rows = [[escape(chart.y_values[r]),
                 *(NONE if v is None else f"{v:.0%}" for v in grid[r])]
                for r in range(len(grid))]
        data = table([f"{y.get('knob')} \\ {x.get('knob')}", *chart.x_values], rows,
                     numeric_from=1)
        parts.append(
            f"<h3>{escape(strategy)}</h3><figure>"
            f"{svg.render_heatmap(chart, f'{anchor}-{strategy}')}"
            f"<figcaption>{escape(chart.title)}.{_seed_sentence(grid, mark)}</figcaption>"
            f"<details><summary>The numbers behind this map</summary>{data}</details>"
            "</figure>")
    parts.append("<p><strong>What to look at:</strong> the region where a strategy collapses. "
                 "A strategy that closes connections on a deadline collapses wherever "
                 "destroyed connections outpace one-at-a-time refill; one whose deadline ends "
                 "only the caller's wait should stay clear everywhere.</p>")
    return "".join(parts)


def _seed_sentence(grid: list[list[float | None]], mark: tuple[int, int] | None) -> str:
    if mark is None:
        return ""
    value = grid[mark[0]][mark[1]]
    return "" if value is None else f" At the outage's setting: {value:.0%} of runs collapse."


def sim_validate(result: Result, anchor: str) -> str:
    data = result.data
    bars = data.get("bars") or {}
    cells = data.get("cells") or []
    agreement, worst = data.get("verdict_agreement"), data.get("worst_answered_difference")
    passed = data.get("passed")
    head = (f"<p>The same grid run in the lab (short runs on real servers) and in the model. "
            f"Verdicts agree in <strong>{_pct(agreement)}</strong> of cells (bar "
            f"{_pct(bars.get('verdict_agreement'))}); where both hold, answered per second "
            f"differs by at most <strong>{_pct(worst)}</strong> (bar "
            f"{_pct(bars.get('answered_difference'))}). "
            f"{badge(_verdicts.PASSED.word if passed else _verdicts.FAILED.word)} "
            f"{'the model passes' if passed else 'the model does not pass'} its check.</p>")
    rows = []
    for cell in cells:
        lab, model = cell.get("lab") or {}, cell.get("model") or {}
        agree = cell.get("verdicts_agree")
        rows.append([
            _num(cell.get("pool_size")), _ms(cell.get("connect_latency")),
            _ms(cell.get("stall")) if cell.get("stall") else "none",
            escape(str(cell.get("strategy"))), _side(lab), _side(model),
            "yes" if agree else "<strong>no</strong>",
            " / ".join(_num(v) for v in lab.get("answered_per_second_thirds", [])),
            " / ".join(_num(v) for v in model.get("answered_per_second_thirds", [])),
            f"{_num(lab.get('server_connections_opened'))} / "
            f"{_num(model.get('server_connections_opened'))}",
            _pct(cell.get("answered_difference")),
        ])
    grid = table(["pool", "connect latency", "stall", "strategy", "lab", "model", "agree",
                  "lab ok/s by third", "model ok/s by third", "server conns opened lab / model",
                  "answered difference"], rows, caption="Lab against model, cell by cell",
                 numeric_from=7)
    return head + grid


def _side(side: dict[str, Any]) -> str:
    """The verdict's badge, then how many of the runs had it (older files, without
    ``verdict_runs``: the badge alone)."""
    runs, count = side.get("runs"), side.get("verdict_runs")
    tail = f"&nbsp;{_num(count)}/{_num(runs)}" if isinstance(count, int) and count else ""
    return badge(str(side.get("verdict"))) + tail


def _pct(value: Any) -> str:
    return NONE if not isinstance(value, (int, float)) else f"{value:.0%}"


def _ms(value: Any) -> str:
    return NONE if not isinstance(value, (int, float)) else f"{value * 1000:.0f} ms"


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 10 else f"{value:g}"
    return NONE if value is None else escape(str(value))


def headline(result: Result) -> list[tuple[str, str]]:
    """(strategy or check, verdict HTML) rows for the page's verdict table."""
    if result.scenario == "phase-map":
        mark = _seed_cell(result)
        rows = []
        for strategy, grid in (result.data.get("collapse_probability") or {}).items():
            cells = [v for row in grid for v in row if v is not None]
            area = sum(v > 0 for v in cells) / len(cells) if cells else 0.0
            at_seed = "" if mark is None else \
                f"; {grid[mark[0]][mark[1]]:.0%} of runs at the outage's setting"
            rows.append((strategy, f"collapses somewhere in {area:.0%} of the map{at_seed}"))
        return rows
    if result.scenario == "sim-validate":
        agreement = result.data.get("verdict_agreement")
        verdict = _verdicts.PASSED.word if result.data.get("passed") else _verdicts.FAILED.word
        return [("model vs lab", f"{badge(verdict)} verdicts agree in {_pct(agreement)} of "
                                 "cells")]
    return []
