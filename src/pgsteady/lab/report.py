"""Rendering lab results: rich tables for the terminal, PNG charts, the JSON file.

Renderers only read results; they never touch a database.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pgsteady._extras import needs, require
from pgsteady.lab.scenarios.pool_drain import PoolDrainResult, RunResult

with needs("cli", "the pool-drain lab's tables"):
    from rich.table import Table

_COLOURS = {"answered": "#2e7d32", "timeouts": "#c62828", "rejected": "#9e9e9e",
            "db": "#1565c0", "ceiling": "#6a1b9a"}


def verdict_text(run: RunResult) -> str:
    if run.collapsed:
        return "[bold red]collapsed[/]"
    if run.recovered:
        return "[green]held[/]" if not any(r["timeouts"] for r in run.per_second) \
            else "[yellow]recovered[/]"
    return "[yellow]degraded[/]"


def _thirds(run: RunResult, key: str) -> tuple[float, float, float]:
    values = [r[key] for r in run.per_second]
    third = max(1, len(values) // 3)
    middle = values[third:-third] or values
    return (sum(values[:third]) / third, sum(middle) / len(middle),
            sum(values[-third:]) / third)


def ceiling_share(run: RunResult, ceiling: float) -> tuple[float, float]:
    """(worst, mean) answered/s as a share of the pgbench ceiling, over every second but the
    first (which includes the workers' start-up)."""
    after_first = [r["answered"] for r in run.per_second[1:]] or [0]
    if ceiling <= 0:
        return (0.0, 0.0)
    return (min(after_first) / ceiling, sum(after_first) / len(after_first) / ceiling)


def summary_table(result: PoolDrainResult) -> Table:
    table = Table(title=f"pool-drain: pgbench ceiling {result.pgbench_tps:.0f} q/s "
                        f"({result.versions.get('pgbouncer', '')})", title_justify="left")
    for name in ("strategy", "run", "verdict", "ok/s first⅓", "ok/s mid⅓", "ok/s last⅓",
                 "worst s % ceiling", "timeouts", "rejected", "db done", "srv conns opened",
                 "not-ready", "dropped cancels", "peak cl_waiting", "driver CPU s"):
        table.add_column(name, justify="left" if name in ("strategy", "verdict") else "right")
    table.caption = "; ".join(
        f"{strategy}: collapsed in {sum(r.collapsed for r in runs)}/{len(runs)} runs, "
        f"recovered in {sum(r.recovered for r in runs)}/{len(runs)}"
        for strategy in dict.fromkeys(r.strategy for r in result.runs)
        for runs in [[r for r in result.runs if r.strategy == strategy]])
    if any(run.ceiling_tps for run in result.runs):
        table.caption += ("; worst s % ceiling: against pgbench on each run's own cluster, "
                          "just before it")
    table.caption_justify = "left"
    for run in result.runs:
        first, mid, last = _thirds(run, "answered")
        worst, _mean = ceiling_share(run, run.ceiling_tps or result.pgbench_tps)
        t = run.totals
        table.add_row(run.strategy, str(run.run), verdict_text(run), f"{first:.0f}",
                      f"{mid:.0f}", f"{last:.0f}", f"{worst:.0%}", str(t["timeouts"]),
                      str(t["rejected"]), str(t["db_completions"]),
                      str(t["server_connections_opened"]), str(t["not_ready_closures"]),
                      str(run.dropped_cancels), str(t["cl_waiting"]),
                      f"{run.driver_cpu_seconds:.1f}")
    return table


def per_second_table(run: RunResult, ceiling: float) -> Table:
    table = Table(title=f"{run.strategy}, run {run.run}: per second", title_justify="left")
    columns = [("s", "t"), ("ok", "answered"), ("tmo", "timeouts"), ("rej", "rejected"),
               ("db", "db_completions"), ("sv_new", "server_connections_opened"),
               ("notrdy", "not_ready_closures"), ("cl_wait", "cl_waiting"),
               ("sv_act", "sv_active"), ("sv_login", "sv_login")]
    for title, _ in columns:
        table.add_column(title, justify="right")
    table.add_column("% ceiling", justify="right")
    for row in _condensed(run.per_second):
        share = f"{row['answered'] / ceiling:.0%}" if ceiling else "-"
        table.add_row(*(_fmt(row[key]) for _, key in columns), share)
    return table


def _condensed(rows: list[dict[str, Any]], limit: int = 20) -> list[dict[str, Any]]:
    """Every second for short runs; for long ones, every n-th plus the last."""
    if len(rows) <= limit:
        return rows
    step = -(-len(rows) // limit)
    return rows[::step] + ([rows[-1]] if (len(rows) - 1) % step else [])


def _fmt(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def write_json(result: PoolDrainResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.to_json(), indent=2) + "\n")


def write_charts(result: PoolDrainResult, out: Path) -> list[Path]:
    """One PNG per strategy and run, and ``pool-drain.png`` with run 1 of each side by side."""
    matplotlib = require("matplotlib", extra="lab", feature="the lab's charts")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for run in result.runs:
        fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
        _draw(ax, result, run)
        ax.legend(loc="upper right", fontsize=7)
        fig.tight_layout()
        suffix = "" if run.run == 1 else f"-run{run.run}"
        path = out / f"pool-drain-{run.strategy}{suffix}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    firsts = [run for run in result.runs if run.run == 1]
    fig, axes = plt.subplots(1, len(firsts), figsize=(6 * len(firsts), 4), dpi=110,
                             sharey=True, squeeze=False)
    for ax, run in zip(axes[0], firsts, strict=True):
        _draw(ax, result, run)
    axes[0][-1].legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    combined = out / "pool-drain.png"
    fig.savefig(combined)
    plt.close(fig)
    return [combined, *written]


def _draw(ax: Any, result: PoolDrainResult, run: RunResult) -> None:
    c = result.config
    rows = run.per_second
    t = [r["t"] + 0.5 for r in rows]
    answered = [r["answered"] for r in rows]
    timeouts = [r["timeouts"] for r in rows]
    rejected = [r["rejected"] for r in rows]
    if c.burst_workers:
        ax.axvspan(c.burst_start, c.burst_end, color="#fff3e0", zorder=0,
                   label=f"burst +{c.burst_workers} workers")
    if c.stall:
        ax.axvline(c.stall_at, color="#ef6c00", linestyle=":",
                   label=f"{c.stall * 1000:.0f} ms stall")
    ax.bar(t, answered, width=0.8, color=_COLOURS["answered"], label="answered in time")
    ax.bar(t, timeouts, width=0.8, bottom=answered, color=_COLOURS["timeouts"],
           label="caller timed out")
    bottom = [a + b for a, b in zip(answered, timeouts, strict=True)]
    ax.bar(t, rejected, width=0.8, bottom=bottom, color=_COLOURS["rejected"],
           label="rejected (fail fast)")
    ax.plot(t, [r["db_completions"] for r in rows], color=_COLOURS["db"], marker="o",
            markersize=3, label="finished on the database")
    ax.axhline(result.pgbench_tps, color=_COLOURS["ceiling"], linestyle="--",
               label=f"pgbench ceiling {result.pgbench_tps:.0f}/s")
    verdict = "collapsed" if run.collapsed else ("held" if run.recovered else "degraded")
    ax.set_title(f"{run.strategy}: {verdict} (pool {c.pool_size}, "
                 f"+{c.connect_latency * 1000:.0f} ms per connection)", fontsize=9)
    ax.set_xlabel("seconds")
    ax.set_ylabel("queries per second")
    ax.set_xlim(0, len(rows))
