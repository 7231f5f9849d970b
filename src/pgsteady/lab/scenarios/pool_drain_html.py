"""The pool-drain scenario's section of ``pgsteady report``'s HTML page: its charts and tables,
beside the scenario (the page finds it through the registry; it reads the JSON only).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from pgsteady import _verdicts
from pgsteady.report import svg
from pgsteady.report.inputs import Result
from pgsteady.report.sections import (
    LOW_MARK,
    NONE,
    badge,
    config_list,
    figure,
    glossary,
    num,
    strategies,
    table,
    verdict_counts,
    verdict_of,
    versions_line,
)


def _pool_drain_chart(result: Result, run: dict[str, Any], chart_id: str) -> str:
    config = result.data.get("config", {})
    rows = run.get("per_second", [])
    ceiling = float(result.data.get("ceiling", {}).get("pgbench_tps") or 0)

    def col(key: str) -> list[float]:
        return [float(r.get(key) or 0) for r in rows]

    verdict = verdict_of(run)
    chart = svg.TimeChart(
        title=f"{run.get('strategy')}, run {run.get('run')}: {verdict}; "
              "answers per second by outcome",
        y_label="queries per second", seconds=len(rows),
        bars=[svg.Series("answered in time", col("answered"), "good"),
              svg.Series("caller timed out", col("timeouts"), "bad-hatch"),
              svg.Series("refused at once", col("rejected"), "muted")],
        lines=[svg.Series("finished on the database", col("db_completions"), "line")])
    if config.get("burst_workers"):
        chart.bands.append(svg.Band(f"burst +{config['burst_workers']} workers",
                                    float(config.get("burst_start", 0)),
                                    float(config.get("burst_end", 0))))
    if config.get("stall"):
        chart.markers.append(svg.Marker(f"{float(config['stall']) * 1000:.0f} ms stall",
                                        float(config.get("stall_at", 0))))
    low = _verdicts.ceiling_low(col("answered"), ceiling)
    if ceiling:
        chart.levels.append(svg.Level(f"pgbench ceiling {ceiling:.0f}/s"
                                      + (" (measured low)" if low else ""), ceiling))
    totals = run.get("totals", {})
    caption = (f"<strong>{escape(str(run.get('strategy')))}</strong>: {badge(verdict)}. "
               f"{num(totals.get('answered'))} answered, {num(totals.get('timeouts'))} timed "
               f"out; the pooler opened {num(totals.get('server_connections_opened'))} server "
               f"connections and closed {num(totals.get('not_ready_closures'))} as not ready."
               + (f" {LOW_MARK} Answers per second {escape(_verdicts.CEILING_LOW_NOTE)}." if low
                  else ""))
    keys = ("t", "answered", "timeouts", "rejected", "db_completions",
            "server_connections_opened", "not_ready_closures", "cl_waiting", "sv_login")
    data = table(keys, ([num(r.get(k)) for k in keys] for r in rows), numeric_from=0)
    return figure(svg.render_time_chart(chart, chart_id), chart.legend(), caption, data)


def _thirds(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return (0.0, 0.0, 0.0)
    third = max(1, len(values) // 3)
    middle = values[third:-third] or values
    return (sum(values[:third]) / third, sum(middle) / len(middle),
            sum(values[-third:]) / third)


def section(result: Result, anchor: str) -> str:
    config = result.data.get("config", {})
    ceiling = float(result.data.get("ceiling", {}).get("pgbench_tps") or 0)
    model = result.source == "sim"
    intro = (
        "<p>A PgBouncer pool of {pool} server connections, each new one costing {lat:.0f} ms, "
        "serves {workers} workers running {qt:.0f} ms queries with a {dl:.0f} ms deadline; "
        "{burst}. {where}</p>").format(
        pool=num(config.get("pool_size", "?")),
        lat=float(config.get("connect_latency", 0)) * 1000,
        workers=num(config.get("workers", "?")), qt=float(config.get("query_time", 0)) * 1000,
        dl=float(config.get("deadline", 0)) * 1000,
        burst=(f"{num(config.get('burst_workers'))} more join from "
               f"{num(config.get('burst_start'))} s to {num(config.get('burst_end'))} s")
        if config.get("burst_workers") else "no burst",
        where="These figures come from the discrete-event model, not from real servers."
        if model else "Everything ran for real on loopback: PostgreSQL, PgBouncer, a "
                      "latency proxy and the load driver.")
    look = ("<p><strong>What to look at:</strong> green bars are callers answered in time, "
            "hatched red ones callers whose deadline passed, the line is what the database "
            "actually finished. A strategy that closes connections on a deadline makes "
            "PgBouncer destroy a server connection for every caller that gave up while "
            "queued; it can open only one at a time, so the pool shrinks and stays down after "
            "the burst (verdict <em>collapsed</em>). A strategy whose deadline ends only the "
            "caller's wait keeps every connection and stays near the dashed ceiling "
            "(<em>held</em>, or <em>recovered</em> when some callers' deadlines passed in the "
            "burst).</p>" + glossary(_verdicts.POOL_DRAIN))
    charts = []
    for strategy in strategies(result):
        first = next(r for r in result.runs if r.get("strategy") == strategy)
        charts.append(f"<h3>{escape(strategy)}</h3>"
                      + _pool_drain_chart(result, first, f"{anchor}-{strategy}"))
    rows = []
    any_low = False
    for strategy in strategies(result):
        runs = [r for r in result.runs if r.get("strategy") == strategy]
        counts = verdict_counts(result, strategy)
        verdicts = ", ".join(f"{badge(v)}&nbsp;{n}/{len(runs)}" for v, n in counts.items())
        answered = [[float(s.get("answered") or 0) for s in r.get("per_second", [])]
                    for r in runs]
        thirds = [_thirds(a) for a in answered]
        worst = [min(a[1:] or [0]) / ceiling for a in answered if ceiling]
        mean = [sum(a[1:]) / max(len(a) - 1, 1) / ceiling for a in answered if ceiling]
        low = any(_verdicts.ceiling_low(a, ceiling) for a in answered)

        def marked(share: float, low: bool = low) -> str:
            # Only a share that reads above 100 % carries the mark (a 96 % cell needs none).
            return f"{share:.0%}" + (LOW_MARK if low and round(share * 100) > 100 else "")

        def avg(values: Sequence[float]) -> float:
            return sum(values) / len(values) if values else 0.0

        def total(key: str, runs: list[dict[str, Any]] = runs) -> str:
            return num(round(avg([float(r.get("totals", {}).get(key) or 0) for r in runs])))
        rows.append([escape(strategy), verdicts,
                     *(f"{avg([t[i] for t in thirds]):.0f}" for i in range(3)),
                     marked(min(worst)) if worst else NONE,
                     marked(avg(mean)) if mean else NONE,
                     total("timeouts"), total("server_connections_opened"),
                     total("not_ready_closures")])
        any_low = any_low or any(LOW_MARK in cell for cell in rows[-1][5:7])
    summary = table(["strategy", "verdicts", "ok/s first ⅓", "ok/s middle ⅓", "ok/s last ⅓",
                     "worst second, % of ceiling", "mean, % of ceiling", "timeouts per run",
                     "server connections opened per run", "not-ready closures per run"],
                    rows, caption=(f"Per strategy, averaged over runs; ceiling "
                                   f"{ceiling:.0f} queries/s" if ceiling else "Per strategy")
                    + (f". {LOW_MARK} Answers per second {_verdicts.CEILING_LOW_NOTE}"
                       if any_low else ""),
                    numeric_from=2)
    return (f"{intro}{versions_line(result)}{config_list(config, skip=('strategies',))}"
            f"{look}{''.join(charts)}{summary}")
