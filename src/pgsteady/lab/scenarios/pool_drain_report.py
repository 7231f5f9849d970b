"""Rendering lab results: rich tables for the terminal, PNG charts, the JSON file.

Renderers only read results; they never touch a database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pgsteady import _verdicts
from pgsteady.lab import charts
from pgsteady.lab.scenarios.pool_drain import PoolDrainResult, RunResult
from pgsteady.lab.tables import ALWAYS, Column, FitTable

_COLOURS = {"answered": "#2e7d32", "timeouts": "#c62828", "rejected": "#9e9e9e",
            "db": "#1565c0", "ceiling": "#6a1b9a"}
LOW_MARK = "†"  # a share of the ceiling above 100 %: the ceiling measured low


def verdict_text(run: RunResult) -> str:
    return _verdicts.rich(run.verdict)


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


def ceiling_low(run: RunResult, ceiling: float) -> bool:
    return _verdicts.ceiling_low([r["answered"] for r in run.per_second], ceiling)


def _share(share: float, low: bool) -> str:
    """The share as a percentage; marked only where it reads above 100 % (a run whose
    ceiling measured low can still have a 96 % second, which needs no excuse)."""
    return f"{share:.0%}" + (LOW_MARK if low and round(share * 100) > 100 else "")


# Short headers the legend explains; shared by the summary and the per-second table.
TMO = "callers whose deadline passed (timed out)"
REJ = "callers refused at once: the backlog was full (fail fast)"
DB = "queries that finished on the database (its own count)"
SV_NEW = "server connections PgBouncer opened"
NOTRDY = "server connections PgBouncer closed as not ready: a client left while queued"
CL_WAIT = "clients waiting in PgBouncer for a server connection (peak)"


def summary_table(result: PoolDrainResult) -> FitTable:
    words = [run.verdict for run in result.runs]
    worst_cells = [_share(ceiling_share(run, run.ceiling_tps or result.pgbench_tps)[0],
                          ceiling_low(run, run.ceiling_tps or result.pgbench_tps))
                   for run in result.runs]
    low = any(LOW_MARK in cell for cell in worst_cells)  # the note explains a shown mark
    notes = [(w, _verdicts.of(w).meaning) for w, _ in _verdicts.counts(words)]
    if any(run.ceiling_tps for run in result.runs):
        notes.append(("ceiling", "worst % ceil is against pgbench on each run's own cluster, "
                                 "just before it"))
    if low:
        notes.append((LOW_MARK, _verdicts.CEILING_LOW_NOTE))
    table = FitTable(
        f"pool-drain: pgbench ceiling {result.pgbench_tps:.0f} q/s "
        f"({result.versions.get('pgbouncer', '')})",
        [Column("strategy", justify="left"), Column("run"),
         Column("verdict", justify="left"),
         Column("ok/s first⅓", "callers answered in time per second, first third of the run",
                priority=6),
         Column("ok/s mid⅓", "callers answered in time per second, middle third",
                priority=7),
         Column("ok/s last⅓", "callers answered in time per second, last third (the verdict "
                "compares it with the first)", priority=1),
         Column("worst % ceil", "the slowest second but the first, as a share of "
                "pgbench's ceiling", priority=2),
         Column("tmo", TMO, priority=3), Column("rej", REJ, priority=9),
         Column("db", DB, priority=8), Column("sv_new", SV_NEW, priority=4),
         Column("notrdy", NOTRDY, priority=5),
         Column("cancels", "cancel requests PgBouncer dropped (for a queued client)",
                priority=11),
         Column("cl_wait", CL_WAIT, priority=10),
         Column("cpu s", "the load driver's CPU seconds", priority=12)],
        caption="; ".join(
            f"{strategy}: " + ", ".join(f"{word} {n}/{len(runs)}"
                                        for word, n in _verdicts.counts(r.verdict for r in runs))
            for strategy in dict.fromkeys(r.strategy for r in result.runs)
            for runs in [[r for r in result.runs if r.strategy == strategy]]),
        notes=notes)
    for run, worst in zip(result.runs, worst_cells, strict=True):
        first, mid, last = _thirds(run, "answered")
        t = run.totals
        table.add_row(run.strategy, str(run.run), verdict_text(run), f"{first:.0f}",
                      f"{mid:.0f}", f"{last:.0f}", worst,
                      str(t["timeouts"]), str(t["rejected"]), str(t["db_completions"]),
                      str(t["server_connections_opened"]), str(t["not_ready_closures"]),
                      str(run.dropped_cancels), str(t["cl_waiting"]),
                      f"{run.driver_cpu_seconds:.1f}")
    return table


def per_second_table(run: RunResult, ceiling: float) -> FitTable:
    low = ceiling_low(run, ceiling)
    columns = [(Column("s", "second of the run"), "t"),
               (Column("ok", "callers answered in time"), "answered"),
               (Column("tmo", TMO, priority=1), "timeouts"),
               (Column("rej", REJ, priority=4), "rejected"),
               (Column("db", DB, priority=2), "db_completions"),
               (Column("sv_new", SV_NEW, priority=3), "server_connections_opened"),
               (Column("notrdy", NOTRDY, priority=5), "not_ready_closures"),
               (Column("cl_wait", CL_WAIT, priority=6), "cl_waiting"),
               (Column("sv_act", "server connections running a query (mean)", priority=7),
                "sv_active"),
               (Column("sv_login", "server connections logging in (mean)", priority=8),
                "sv_login")]
    table = FitTable(
        f"{run.strategy}, run {run.run}: per second ({_verdicts.rich(run.verdict)})",
        [*(column for column, _ in columns),
         Column("% ceil", "answered as a share of pgbench's ceiling", priority=ALWAYS)],
        notes=[(LOW_MARK, _verdicts.CEILING_LOW_NOTE)] if low else [])
    for row in _condensed(run.per_second):
        share = _share(row["answered"] / ceiling, low and row["answered"] > ceiling) \
            if ceiling else "-"
        table.add_row(*(_fmt(row[key]) for _, key in columns), share)
    return table


def tables(result: PoolDrainResult) -> list[FitTable]:
    """What the terminal shows: run 1 of each strategy second by second, then the summary."""
    return [*(per_second_table(run, result.pgbench_tps) for run in result.runs if run.run == 1),
            summary_table(result)]


def _condensed(rows: list[dict[str, Any]], limit: int = 20) -> list[dict[str, Any]]:
    """Every second for short runs; for long ones, every n-th plus the last."""
    if len(rows) <= limit:
        return rows
    step = -(-len(rows) // limit)
    return rows[::step] + ([rows[-1]] if (len(rows) - 1) % step else [])


def _fmt(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def write_json(result: PoolDrainResult, path: Path) -> None:
    charts.write_json(result.to_json(), path)


def write_charts(result: PoolDrainResult, out: Path) -> list[Path]:
    """One PNG per strategy and run, and ``pool-drain.png`` with run 1 of each side by side."""
    plt = charts.pyplot()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for run in result.runs:
        fig, ax = plt.subplots(figsize=(7, 4.4), dpi=110)
        _draw(ax, result, run)
        _legend_below(fig, [ax])
        written.append(charts.save(fig, charts.run_path(out, "pool-drain", run)))
    firsts = [run for run in result.runs if run.run == 1]
    fig, axes = plt.subplots(1, len(firsts), figsize=(6 * len(firsts), 4.4), dpi=110,
                             sharey=True, squeeze=False)
    for ax, run in zip(axes[0], firsts, strict=True):
        _draw(ax, result, run)
    _legend_below(fig, list(axes[0]))
    return [charts.save(fig, out / "pool-drain.png"), *written]


def _legend_below(fig: Any, axes: list[Any]) -> None:
    """One legend for the figure, under the charts: inside an axes it covered the bars (the
    rejected ones reach the top during a burst)."""
    entries: dict[str, Any] = {}
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        entries.update((label, handle) for handle, label in zip(handles, labels, strict=True)
                       if label not in entries)
    columns = min(len(entries), 3 * len(axes))  # three entries fit under each chart
    fig.legend(list(entries.values()), list(entries), loc="lower center", fontsize=7,
               ncol=columns, frameon=False)
    fig.tight_layout(rect=(0, 0.03 + 0.05 * -(-len(entries) // columns), 1, 1))


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
    ceiling = result.pgbench_tps
    low = " (measured low: the machine's speed drifted)" if ceiling_low(run, ceiling) else ""
    ax.axhline(ceiling, color=_COLOURS["ceiling"], linestyle="--",
               label=f"pgbench ceiling {ceiling:.0f}/s{low}")
    charts.verdict_title(ax, f"{run.strategy}: {run.verdict} (pool {c.pool_size}, "
                         f"+{c.connect_latency * 1000:.0f} ms per connection)", run.verdict)
    ax.set_xlabel("seconds")
    ax.set_ylabel("queries per second")
    ax.set_xlim(0, len(rows))
