"""Rendering the model's own results: validation and phase maps as rich tables, phase maps
as PNG heatmaps. The pool-drain runs themselves use the lab's renderers
(:mod:`pgsteady.lab.scenarios.pool_drain_report`). Renderers only read results."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from pgsteady import _verdicts
from pgsteady._extras import needs, require
from pgsteady.lab.tables import Column, FitTable
from pgsteady.sim.config import SimConfig
from pgsteady.sim.phase_map import Axis, PhaseMap
from pgsteady.sim.validate import ANSWERED_TOLERANCE, VERDICT_AGREEMENT, Side, Validation

with needs("cli", "the model's tables"):
    pass


def validation_table(result: Validation) -> FitTable:
    worst = result.worst_answered_difference
    words = [w for cell in result.cells for w in (cell.lab.verdict, cell.model.verdict)]
    table = FitTable(
        f"sim validate: verdicts agree in {result.agreement:.0%} of cells "
        f"(bar {VERDICT_AGREEMENT:.0%}); answered/s where both hold differs by at most "
        f"{'-' if worst is None else f'{worst:.1%}'} (bar {ANSWERED_TOLERANCE:.0%})",
        [Column("pool", "PgBouncer's pool size"), Column("latency", "connect latency"),
         Column("stall", "a stall during the burst", priority=9),
         Column("strategy", justify="left"),
         Column("pgbench", "pgbench's ceiling on the lab's path (q/s)", priority=7),
         Column("rt p50/p99", "the round trip measured on the lab's path (ms): the model's "
                "input", priority=8),
         Column("lab", "the lab's verdict: the most common over the runs (held and recovered "
                "count together: the pool was back), then runs with it/runs",
                justify="left"),
         Column("model", "the model's verdict, the same way; ✗: it disagrees with the lab's",
                justify="left"),
         Column("ok/s lab", "mean answered per second in the first, middle and last third",
                priority=2),
         Column("ok/s model", "the same in the model", priority=3),
         Column("diff", "the largest difference in answered/s over the thirds, where both "
                "hold", priority=1),
         Column("sv_new lab", "server connections opened in the lab", priority=5),
         Column("sv_new model", "server connections opened in the model", priority=6)],
        notes=[(w, _verdicts.of(w).meaning) for w, _ in _verdicts.counts(words)])
    for cell in result.cells:
        difference = cell.answered_difference
        table.add_row(
            str(cell.pool_size), f"{cell.connect_latency * 1000:g} ms",
            f"{cell.stall * 1000:g} ms" if cell.stall else "-", cell.strategy,
            f"{cell.pgbench_tps:.0f}",
            f"{cell.round_trip * 1000:.2f}/"
            + ("-" if cell.round_trip_p99 is None else f"{cell.round_trip_p99 * 1000:.1f}"),
            _side(cell.lab), _side(cell.model) + ("" if cell.verdicts_agree else " ✗"),
            " / ".join(f"{v:.0f}" for v in cell.lab.answered_thirds),
            " / ".join(f"{v:.0f}" for v in cell.model.answered_thirds),
            "-" if difference is None else f"{difference:.1%}",
            f"{cell.lab.server_connections_opened:.0f}",
            f"{cell.model.server_connections_opened:.0f}")
    return table


def _side(side: Side) -> str:
    return f"{_verdicts.rich(side.verdict)} {side.verdict_runs}/{side.runs}"


def phase_map_tables(result: PhaseMap) -> list[FitTable]:
    tables = []
    for strategy, rows in result.probability.items():
        table = FitTable(
            f"{strategy}: probability of collapse ({result.base.runs} runs per cell); rows "
            f"{result.y.knob}, columns {result.x.knob}",
            [Column(f"{result.y.knob} \\ {result.x.knob}"),
             *(Column(result.x.label(value)) for value in result.x.values)])
        for value, row in zip(result.y.values, rows, strict=True):
            table.add_row(result.y.label(value), *(f"{p:.2f}" for p in row))
        tables.append(table)
    return tables


def _position(axis: Axis, value: float) -> float:
    """Where ``value`` falls on the heatmap's cell grid (fractional index)."""
    values = list(axis.values)
    scale: Callable[[float], float] = math.log if values[0] > 0 and value > 0 else float
    if value <= values[0]:
        return 0.0
    if value >= values[-1]:
        return float(len(values) - 1)
    for i in range(len(values) - 1):
        if values[i] <= value <= values[i + 1]:
            low, high = scale(values[i]), scale(values[i + 1])
            return i + (scale(value) - low) / (high - low)
    return 0.0


def write_phase_map(phase: PhaseMap, out: Path, marked: SimConfig | None = None) -> list[Path]:
    """One heatmap per strategy; ``marked`` (default: the base setting) gets a star."""
    matplotlib = require("matplotlib", extra="lab", feature="the model's phase maps")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    point = marked or phase.base
    written = []
    for strategy, rows in phase.probability.items():
        fig, ax = plt.subplots(figsize=(7, 5.2), dpi=110)
        image = ax.imshow(rows, origin="lower", cmap="RdYlGn_r", vmin=0, vmax=1,
                          aspect="auto")
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                ax.text(c, r, f"{value:.2f}".rstrip("0").rstrip(".") if value else "0",
                        ha="center", va="center", fontsize=7,
                        color="white" if 0.25 < value < 0.75 or value > 0.9 else "black")
        ax.set_xticks(range(len(phase.x.values)),
                      [phase.x.label(v) for v in phase.x.values], rotation=45, fontsize=7)
        ax.set_yticks(range(len(phase.y.values)),
                      [phase.y.label(v) for v in phase.y.values], fontsize=7)
        ax.set_xlabel(phase.x.knob)
        ax.set_ylabel(phase.y.knob)
        px = _position(phase.x, float(getattr(point, phase.x.field)))
        py = _position(phase.y, float(getattr(point, phase.y.field)))
        ax.plot([px], [py], marker="*", markersize=20, markerfacecolor="none",
                markeredgecolor="#1565c0", markeredgewidth=2)
        b = phase.base
        ax.set_title(f"{strategy}: probability of collapse ({b.runs} runs per cell; "
                     f"blue star: the base setting)\n"
                     f"{b.workers} workers +{b.burst_workers} from {b.burst_start:g}-"
                     f"{b.burst_end:g} s, {b.query_time * 1000:g} ms queries, "
                     f"{b.deadline * 1000:g} ms deadline, {b.poolers} pooler(s)"
                     + (f", stalls {b.stall_rate:g}/s of {b.stall_mean * 1000:g} ms on average"
                        if b.stall_rate else "")
                     + (f", a {b.stall * 1000:g} ms stall at {b.stall_at:g} s"
                        if b.stall else ""), fontsize=8)
        fig.colorbar(image, ax=ax, label="P(collapse)")
        fig.tight_layout()
        path = out / f"phase-map-{strategy}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written
