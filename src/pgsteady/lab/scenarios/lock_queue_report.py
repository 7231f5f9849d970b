"""Rendering the lock-queue lab: rich tables, the JSON file, one PNG per strategy.

Renderers only read results; they never touch a database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pgsteady import _verdicts
from pgsteady._extras import needs
from pgsteady.lab import charts
from pgsteady.lab.scenarios.lock_queue import LockQueueResult, RunResult, answered_share
from pgsteady.lab.tables import Column, FitTable

with needs("cli", "the lock-queue lab's tables"):
    pass

_COLOURS = {"ok": "#2e7d32", "failed": "#c62828", "timed_out": "#ef6c00",
            "sessions": "#1565c0", "queued": "#6a1b9a", "max": "#424242",
            "long": "#fff3e0", "migration": "#e3f2fd", "restart": "#b71c1c"}


def verdict_text(run: RunResult) -> str:
    return _verdicts.rich(run.verdict)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def migration_text(run: RunResult) -> str:
    m = run.migration
    if m.applied:
        return f"applied at {m.applied_at_s:.1f}s ({m.tries} tries)"
    return f"not applied ({m.tries} tries)"


def _exhausted(run: RunResult) -> str:
    t = run.totals
    if not run.connections_exhausted:
        return "no"
    return f"yes: {t['connections_refused']} refused from {t['first_refused_s']} s"


def summary_table(result: LockQueueResult) -> FitTable:
    c = result.config
    words = [run.verdict for run in result.runs]
    table = FitTable(
        f"lock-queue: {c.replicas} replicas, {c.rate} req/s, deploy at {c.deploy_at:g}s, log "
        f"query {c.long_query_for:g}s, max_connections {c.max_connections} "
        f"({result.versions.get('postgresql', '')})",
        [Column("strategy", justify="left"), Column("run"),
         Column("verdict", justify="left"),
         Column("uncached ok", "share of uncached lookups answered (what the verdict reads)",
                priority=1),
         Column("cached ok", "share of lookups for organizations in the replicas' cache "
                "answered", priority=10),
         Column("dashboard ok", "share of dashboard log pages answered", priority=11),
         Column("longest failing", "the longest stretch of seconds in which uncached lookups "
                "were answered below 50 %", priority=2),
         Column("restarts", "replicas restarted by failed liveness probes", priority=3),
         Column("peak sessions", "most sessions on the server at one sample", priority=5),
         Column("exhausted", "whether connections were refused for want of a slot",
                priority=4),
         Column("peak lock queue", "most sessions queued on the orgs table's lock",
                priority=8),
         Column("left behind", "most sessions of killed replicas still on the server",
                priority=7),
         Column("migration", "when the deploy's migration was applied", justify="left",
                priority=6),
         Column("blocker named", "whether the migration's failure named the blocking "
                "session", priority=9),
         Column("worst p99 ms", "the worst second's 99th percentile latency", priority=12)],
        caption="; ".join(
            f"{strategy}: " + ", ".join(f"{word} {n}/{len(runs)}" for word, n in
                                        _verdicts.counts((r.verdict for r in runs),
                                                         _verdicts.LOCK_QUEUE))
            for strategy in dict.fromkeys(r.strategy for r in result.runs)
            for runs in [[r for r in result.runs if r.strategy == strategy]]),
        notes=[(v.word, v.meaning) for v in _verdicts.LOCK_QUEUE if v.word in words])
    for run in result.runs:
        t = run.totals
        share = t["answered_share"]
        table.add_row(run.strategy, str(run.run), verdict_text(run), _share(share["uncached"]),
                      _share(share["cached"]), _share(share["dashboard"]),
                      f"{t['uncached_failing_seconds_longest']} s", str(run.restarts),
                      str(t["peak_sessions"]), _exhausted(run),
                      str(t["peak_lock_queue_orgs"]), str(t["peak_left_behind"]),
                      migration_text(run), "yes" if run.migration.blocker_named else "no",
                      f"{t['worst_p99_ms']:.0f}")
    return table


_OFT = "ok/failed/timed out, by the second the request was sent"


def per_second_table(run: RunResult) -> FitTable:
    table = FitTable(
        f"{run.strategy}, run {run.run}: per second ({_verdicts.rich(run.verdict)})",
        [Column("s", "second of the run"), Column("uncached", f"uncached lookups: {_OFT}"),
         Column("cached", f"cached lookups: {_OFT}", priority=8),
         Column("dashboard", f"dashboard log pages: {_OFT}", priority=9),
         Column("p99 ms", "99th percentile latency", priority=10),
         Column("sess", "sessions on the server", priority=1),
         Column("on lock", "sessions queued on a lock", priority=2),
         Column("q orgs", "sessions queued on the orgs table's lock", priority=11),
         Column("left", "sessions of killed replicas still on the server", priority=3),
         Column("refused", "connections refused for want of a slot", priority=4),
         Column("restarts", "replicas restarted", priority=5),
         Column("ready", "replicas passing their readiness probe", priority=7),
         Column("migration", "the migration's state", justify="left", priority=6),
         Column("log query", "whether the long dashboard log query ran", justify="left",
                priority=12)])
    for row in run.per_second:
        table.add_row(str(row["t"]), *(_triple(row, kind) for kind in
                                       ("uncached", "cached", "dashboard")),
                      f"{row['p99_ms']:.0f}", str(row["sessions"]), str(row["queued_on_lock"]),
                      str(row["lock_queue_orgs"]), str(row["left_behind"]),
                      str(row["refused"] or ""), str(row["restarts"] or ""),
                      str(row["replicas_ready"]), row["migration"],
                      "running" if row["long_query"] else "")
    return table


def tables(result: LockQueueResult) -> list[FitTable]:
    """What the terminal shows: run 1 of each strategy second by second, then the summary."""
    return [*(per_second_table(run) for run in result.runs if run.run == 1),
            summary_table(result)]


def _triple(row: dict[str, Any], kind: str) -> str:
    return f"{row['ok'][kind]}/{row['failed'][kind]}/{row['timed_out'][kind]}"


def write_json(result: LockQueueResult, path: Path) -> None:
    charts.write_json(result.to_json(), path)


def write_charts(result: LockQueueResult, out: Path) -> list[Path]:
    """One PNG per strategy and run, and ``lock-queue.png`` with run 1 of each side by side."""
    plt = charts.pyplot()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for run in result.runs:
        fig, axes = plt.subplots(2, 1, figsize=(10, 6), dpi=110, sharex=True)
        _legends(axes, [_draw(axes, result, run)])
        fig.tight_layout()
        written.append(charts.save(fig, charts.run_path(out, "lock-queue", run)))
    firsts = [run for run in result.runs if run.run == 1]
    fig, grid = plt.subplots(2, len(firsts), figsize=(6 * len(firsts) + 2, 6), dpi=110,
                             sharex=True, sharey="row", squeeze=False)
    drawn = [_draw([grid[0][column], grid[1][column]], result, run)
             for column, run in enumerate(firsts)]
    _legends([grid[0][-1], grid[1][-1]], drawn)
    fig.tight_layout()
    return [charts.save(fig, out / "lock-queue.png"), *written]


Handles = list[tuple[Any, str]]


def _legends(axes: Any, drawn: list[tuple[Handles, Handles]]) -> None:
    """One legend per row, outside on the right, with every entry any column drew (once)."""
    for row, ax in enumerate(axes):
        entries = dict((label, handle) for column in drawn for handle, label in column[row]
                       if not label.startswith("_"))
        ax.legend(list(entries.values()), list(entries), loc="upper left", fontsize=6,
                  bbox_to_anchor=(1.13, 1.0), borderaxespad=0)


def _handles(*axes: Any) -> Handles:
    out: Handles = []
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        out += list(zip(handles, labels, strict=True))
    return out


def _draw(axes: Any, result: LockQueueResult, run: RunResult) -> tuple[Handles, Handles]:
    """Draw one run on its two axes; returns (top, bottom) legend entries."""
    c = result.config
    rows = run.per_second
    t = [r["t"] + 0.5 for r in rows]
    top, bottom = axes
    for ax in axes:
        for i, (start, end) in enumerate(run.long_queries):
            ax.axvspan(start, end, color=_COLOURS["long"], zorder=0,
                       label="log query running" if i == 0 else None)
        waiting = [r["t"] for r in rows if r["migration"] in ("waiting", "retrying")]
        if waiting:
            ax.axvspan(min(waiting), max(waiting) + 1, ymin=0.0, ymax=0.06,
                       color="#1565c0", alpha=0.5, zorder=1, label="migration not yet applied")
        if run.migration.applied_at_s is not None:
            ax.axvline(run.migration.applied_at_s, color="#1565c0", linestyle="--",
                       label="migration applied")
        ax.axvline(c.deploy_at, color="#424242", linestyle=":", label="deploy")
        for i, at in enumerate(run.restart_times):
            ax.axvline(at, color=_COLOURS["restart"], alpha=0.5, linewidth=1,
                       label="replica restarted" if i == 0 else None)
    base = [0] * len(rows)
    for outcome, title in (("ok", "answered"), ("failed", "failed"),
                           ("timed_out", "timed out (10 s)")):
        values = [sum(r[outcome].values()) for r in rows]
        top.bar(t, values, width=0.85, bottom=base, color=_COLOURS[outcome], label=title)
        base = [a + b for a, b in zip(base, values, strict=True)]
    uncached = [100 * (answered_share(r) or 0) for r in rows]
    share_ax = top.twinx()
    share_ax.plot(t, uncached, color="black", linewidth=1.2, label="uncached answered %")
    share_ax.set_ylim(0, 105)
    share_ax.set_ylabel("uncached answered %", fontsize=8)
    top.set_ylabel("requests / s (by second sent)")
    charts.verdict_title(top, f"{run.strategy}: {run.verdict}, {run.restarts} restarts, "
                              f"{migration_text(run)}", run.verdict)
    bottom.plot(t, [r["sessions"] for r in rows], color=_COLOURS["sessions"],
                label="sessions on the server")
    bottom.plot(t, [r["queued_on_lock"] for r in rows], color=_COLOURS["queued"],
                linestyle="--", label="queued on a lock")
    bottom.plot(t, [r["left_behind"] for r in rows], color=_COLOURS["failed"], linestyle=":",
                label="left behind by a dead client")
    bottom.axhline(c.max_connections - c.reserved_connections, color=_COLOURS["max"],
                   linestyle="-.", label=f"slots for apps ({c.max_connections} - "
                                         f"{c.reserved_connections} reserved)")
    refused = [r["t"] + 0.5 for r in rows if r["refused"]]
    if refused:
        bottom.scatter(refused, [c.max_connections + 2] * len(refused), marker="x",
                       color=_COLOURS["failed"], s=18, label="connection refused: no slot")
    bottom.set_ylabel("sessions")
    bottom.set_xlabel("seconds")
    bottom.set_xlim(0, len(rows))
    bottom.set_ylim(0, c.max_connections + 5)
    return _handles(top, share_ax), _handles(bottom)
