"""The lock-queue scenario's section of ``pgsteady report``'s HTML page: its charts and tables,
beside the scenario (the page finds it through the registry; it reads the JSON only).
"""

from __future__ import annotations

from html import escape
from typing import Any

from pgsteady import _verdicts
from pgsteady.report import svg
from pgsteady.report.inputs import Result
from pgsteady.report.safe import Kind
from pgsteady.report.sections import (
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

_CLASSES = ("cached", "uncached", "dashboard")


def _by_class(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    if isinstance(value, dict):
        return float(sum(float(v or 0) for v in value.values()))
    return float(value or 0)


def _lock_queue_charts(result: Result, run: dict[str, Any], chart_id: str) -> str:
    config = result.data.get("config", {})
    rows = run.get("per_second", [])
    verdict = verdict_of(run)
    shades: dict[str, Kind] = {"cached": "good", "uncached": "good2", "dashboard": "good3"}
    bars = [svg.Series(f"ok, {c}", [float((r.get("ok") or {}).get(c) or 0) for r in rows],
                       shades[c])
            for c in _CLASSES]
    bars.append(svg.Series("failed", [_by_class(r, "failed") for r in rows], "bad-hatch"))
    if any("timed_out" in r for r in rows):
        bars.append(svg.Series("timed out", [_by_class(r, "timed_out") for r in rows], "muted"))
    requests = svg.TimeChart(
        title=f"{run.get('strategy')}, run {run.get('run')}: {verdict}; requests per second "
              "by outcome", y_label="requests per second", seconds=len(rows), bars=bars)
    sessions = svg.TimeChart(
        title=f"{run.get('strategy')}, run {run.get('run')}: sessions on the server",
        y_label="sessions", seconds=len(rows),
        lines=[svg.Series("sessions", [float(r.get("sessions") or 0) for r in rows], "line"),
               svg.Series("queued on a lock", [float(r.get("queued_on_lock") or 0)
                                               for r in rows], "line-bad")])
    if any("left_behind" in r for r in rows):
        sessions.lines.append(svg.Series("left behind by killed replicas",
                                         [float(r.get("left_behind") or 0) for r in rows],
                                         "line-warn"))
    if config.get("max_connections"):
        usable = int(config["max_connections"]) - int(config.get("reserved_connections") or 0)
        sessions.levels.append(svg.Level(f"connection slots the apps may use ({usable})",
                                         float(usable)))
    bands = [svg.Band("a long log query", float(start), float(end), "band")
             for start, end in _long_queries(run, config, len(rows))]
    migration = run.get("migration") or {}
    if config.get("deploy_at") is not None:
        end = migration.get("applied_at_s")
        bands.append(svg.Band("the migration " + ("until applied" if end is not None
                                                  else "(never applied)"),
                              float(config["deploy_at"]),
                              float(end) if end is not None else float(len(rows)), "band2"))
    restarts = [svg.Marker("replica restarted", float(at), "marker")
                for at in _restart_times(run)]
    # One legend entry for every refusal; the counts are in the numbers behind the chart.
    refused = [svg.Marker("connections refused for lack of a slot",
                          float(r.get("t", 0)) + 0.5, "marker-bad")
               for r in rows if r.get("refused")]
    for chart in (requests, sessions):
        chart.bands.extend(bands)
        chart.markers.extend(restarts)
    sessions.markers.extend(refused)
    mig = ("applied at {:.1f} s".format(float(migration["applied_at_s"]))
           if migration.get("applied_at_s") is not None else "never applied")
    caption = (f"<strong>{escape(str(run.get('strategy')))}</strong>: {badge(verdict)}. "
               f"{num(run.get('restarts'))} replica restarts; connections "
               f"{'exhausted' if run.get('connections_exhausted') else 'never exhausted'}; "
               f"migration {mig} after {num(migration.get('tries'))} tries"
               f"{', its blocker named' if migration.get('blocker_named') else ''}.")
    keys = ("t", "ok", "failed", "timed_out", "p99_ms", "sessions", "queued_on_lock",
            "lock_queue_orgs", "left_behind", "refused", "restarts", "replicas_ready")
    data = table(keys, ([num(_by_class(r, k)) if k in ("ok", "failed", "timed_out")
                         else num(r.get(k))
                         for k in keys] for r in rows), numeric_from=0)
    return (figure(svg.render_time_chart(requests, f"{chart_id}-req"), requests.legend(),
                   caption, data)
            + figure(svg.render_time_chart(sessions, f"{chart_id}-ses"), sessions.legend(),
                     f"Sessions on the server for <strong>{escape(str(run.get('strategy')))}"
                     "</strong>, against the connection limit.", ""))


def _long_queries(run: dict[str, Any], config: dict[str, Any],
                  seconds: int) -> list[tuple[float, float]]:
    """The long queries' spans: the run's own record, else the configured starts."""
    spans = run.get("long_queries")
    if isinstance(spans, list) and spans:
        return [(float(a), float(b)) for a, b in spans]
    starts = config.get("long_query_at", [])
    length = float(config.get("long_query_for") or 0)
    starts = starts if isinstance(starts, list) else [starts]
    return [(float(a), min(float(a) + length, seconds)) for a in starts] if length else []


def _restart_times(run: dict[str, Any]) -> list[float]:
    """When replicas were restarted: the run's own record, else where the count went up."""
    times = run.get("restart_times")
    if isinstance(times, list):
        return [float(t) for t in times]
    found, previous = [], 0.0
    for r in run.get("per_second", []):
        now = float(r.get("restarts") or 0)
        if now > previous:
            found.append(float(r.get("t", 0)))
        previous = now
    return found


def section(result: Result, anchor: str) -> str:
    config = result.data.get("config", {})
    intro = ("<p>A gateway of several replicas serves lookups that read organization settings "
             "(some from a cache), a dashboard log query, and probes, under a supervisor that "
             "restarts replicas whose liveness fails. A log query starts that holds its lock on "
             "<code>orgs</code> for a long time; then a new version is deployed whose migration "
             "needs a brief exclusive lock on <code>orgs</code>.</p>")
    look = ("<p><strong>What to look at:</strong> under <em>naive</em>, the migration waits "
            "with no lock timeout and every query on <code>orgs</code> queues behind it; "
            "liveness probes that query the database fail, replicas are killed (vertical lines) "
            "and their sessions stay on the server until the connection limit is reached. Under "
            "<em>steady</em>, the migration gives up fast and retries, the log query stops at "
            "its statement timeout, lookups are served from cache or fail fast, and no replica "
            "is restarted.</p>" + glossary(_verdicts.LOCK_QUEUE))
    charts = []
    for strategy in strategies(result):
        first = next(r for r in result.runs if r.get("strategy") == strategy)
        charts.append(f"<h3>{escape(strategy)}</h3>"
                      + _lock_queue_charts(result, first, f"{anchor}-{strategy}"))
    rows = []
    for strategy in strategies(result):
        runs = [r for r in result.runs if r.get("strategy") == strategy]
        counts = verdict_counts(result, strategy)
        uncached_ok = sum(float((s.get("ok") or {}).get("uncached") or 0)
                          for r in runs for s in r.get("per_second", []))
        uncached_all = uncached_ok + sum(
            float((s.get("failed") or {}).get("uncached") or 0)
            + float((s.get("timed_out") or {}).get("uncached") or 0)
            for r in runs for s in r.get("per_second", []) if isinstance(s.get("failed"), dict))
        applied = sum(bool((r.get("migration") or {}).get("applied")) for r in runs)
        rows.append([escape(strategy),
                     ", ".join(f"{badge(v)}&nbsp;{n}/{len(runs)}" for v, n in counts.items()),
                     f"{uncached_ok / uncached_all:.1%}" if uncached_all else NONE,
                     num(sum(int(r.get("restarts") or 0) for r in runs)),
                     f"{sum(bool(r.get('connections_exhausted')) for r in runs)}/{len(runs)}",
                     f"{applied}/{len(runs)}"])
    summary = table(["strategy", "verdicts", "uncached lookups answered", "restarts (all runs)",
                     "connections exhausted", "migration applied"], rows,
                    caption="Per strategy, over all runs", numeric_from=2)
    return (f"{intro}{versions_line(result)}{config_list(config)}{look}{''.join(charts)}"
            f"{summary}")
