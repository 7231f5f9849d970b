"""One HTML section per result: what was run, the charts, the summary table, what to look at.

Each scenario has a renderer; a scenario this pgsteady does not know still gets its config and
its runs' verdicts (the page shows whatever it is given). Renderers read JSON, never a database.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from pgsteady import _verdicts
from pgsteady.report import svg
from pgsteady.report.inputs import Result
from pgsteady.report.safe import Kind, css_class, html_id

NONE = "&ndash;"
LOW_MARK = "†"  # a share of the ceiling above 100 %: the ceiling measured low


def verdict_of(run: dict[str, Any]) -> str:
    """The run's verdict in words: the file's own, else the pool-drain rule the lab applies
    (files written before runs carried a ``verdict``)."""
    verdict = run.get("verdict")
    if isinstance(verdict, str) and verdict:
        return verdict
    if "collapsed" not in run:
        return _verdicts.UNKNOWN.word
    timeouts = sum(1 for r in run.get("per_second", []) if isinstance(r, dict)
                   and r.get("timeouts"))
    return _verdicts.pool_drain(bool(run.get("collapsed")), bool(run.get("recovered")),
                                timeouts).word


def verdict_class(verdict: str) -> str:
    """good, warn or bad: the verdict's tone in :mod:`pgsteady._verdicts` (a word it does not
    know, from a newer file or hostile input, is warn)."""
    return _verdicts.tone(verdict)


def badge(verdict: str) -> str:
    mark = {"good": "✓", "bad": "✗", "warn": "!"}[verdict_class(verdict)]
    return (f'<span class="badge {verdict_class(verdict)}"><span aria-hidden="true">{mark}</span> '
            f"{escape(verdict)}</span>")


def glossary(verdicts: Sequence[_verdicts.Verdict]) -> str:
    """What each verdict word of a scenario means, as the page's badges show them."""
    items = "".join(f"<dt>{badge(v.word)}</dt><dd>{escape(v.meaning)}</dd>" for v in verdicts)
    return f"<dl>{items}</dl>"


def strategies(result: Result) -> list[str]:
    return list(dict.fromkeys(str(run.get("strategy", "?")) for run in result.runs))


def verdict_counts(result: Result, strategy: str) -> Counter[str]:
    return Counter(verdict_of(r) for r in result.runs if r.get("strategy") == strategy)


def title_of(result: Result) -> str:
    kind = {"lab": "lab", "sim": "model"}[result.source]
    return f"{result.scenario} ({kind})"


def anchor_of(result: Result, index: int) -> str:
    """The section's id: the scenario's name is input, so only a slug of it."""
    return html_id(f"s{index}", result.scenario, result.source)


# -- small HTML helpers ---------------------------------------------------------------------------

def _num(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    if value is None:
        return NONE
    return escape(str(value))


def table(head: Sequence[str], rows: Iterable[Sequence[str]], caption: str = "",
          numeric_from: int = 1) -> str:
    """A table in a horizontally scrolling box (the page body itself never scrolls sideways).
    Cells are HTML already."""
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    th = "".join(f'<th scope="col"{" class=n" if i >= numeric_from else ""}>{escape(h)}</th>'
                 for i, h in enumerate(head))
    body = "".join(
        "<tr>" + "".join(f'<td{" class=n" if i >= numeric_from else ""}>{c}</td>'
                         for i, c in enumerate(row)) + "</tr>"
        for row in rows)
    return (f'<div class="scroll" tabindex="0"><table>{cap}<thead><tr>{th}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


# Config keys that hold seconds: shown as "50 ms" / "2 s" rather than 0.05.
_SECONDS = ("latency", "time", "deadline", "duration", "delay", "timeout", "interval", "stall",
            "_at", "_start", "_end", "_for")


def _setting(key: str, value: Any) -> str:
    if (isinstance(value, (int, float)) and not isinstance(value, bool)
            and any(part in key for part in _SECONDS)):
        if value == 0:
            return "0"
        return f"{value * 1000:.0f} ms" if abs(value) < 1 else f"{value:g} s"
    return _num(value)


def config_list(config: dict[str, Any], skip: Iterable[str] = ()) -> str:
    skipped = set(skip) | {"versions"}
    items = "".join(f"<div><dt>{escape(str(k).replace('_', ' '))}</dt>"
                    f"<dd>{_setting(str(k), v)}</dd></div>"
                    for k, v in config.items()
                    if k not in skipped and not isinstance(v, (dict, list)))
    lists = "".join(f"<div><dt>{escape(str(k).replace('_', ' '))}</dt>"
                    f"<dd>{escape(', '.join(map(str, v)))}</dd></div>"
                    for k, v in config.items() if k not in skipped and isinstance(v, list))
    return f'<dl class="config">{items}{lists}</dl>'


def versions_line(result: Result) -> str:
    versions = result.data.get("config", {}).get("versions") or result.data.get("versions") or {}
    if not isinstance(versions, dict) or not versions:
        return ""
    parts = ", ".join(f"{escape(str(k))} {escape(str(v))}" for k, v in versions.items())
    return f'<p class="versions">Versions: {parts}.</p>'


def figure(chart_html: str, legend: list[tuple[Kind, str]], caption: str,
           data_table: str) -> str:
    keys = "".join(f'<li><span class="key {css_class(kind)}" aria-hidden="true"></span>'
                   f"{escape(label)}</li>" for kind, label in dict.fromkeys(legend))
    return (f'<figure>{chart_html}<ul class="legend">{keys}</ul>'
            f"<figcaption>{caption}</figcaption>"
            f"<details><summary>The numbers behind this chart</summary>{data_table}</details>"
            "</figure>")


# -- pool drain -----------------------------------------------------------------------------------

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
               f"{_num(totals.get('answered'))} answered, {_num(totals.get('timeouts'))} timed "
               f"out; the pooler opened {_num(totals.get('server_connections_opened'))} server "
               f"connections and closed {_num(totals.get('not_ready_closures'))} as not ready."
               + (f" {LOW_MARK} Answers per second {escape(_verdicts.CEILING_LOW_NOTE)}." if low
                  else ""))
    keys = ("t", "answered", "timeouts", "rejected", "db_completions",
            "server_connections_opened", "not_ready_closures", "cl_waiting", "sv_login")
    data = table(keys, ([_num(r.get(k)) for k in keys] for r in rows), numeric_from=0)
    return figure(svg.render_time_chart(chart, chart_id), chart.legend(), caption, data)


def _thirds(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return (0.0, 0.0, 0.0)
    third = max(1, len(values) // 3)
    middle = values[third:-third] or values
    return (sum(values[:third]) / third, sum(middle) / len(middle),
            sum(values[-third:]) / third)


def pool_drain(result: Result, anchor: str) -> str:
    config = result.data.get("config", {})
    ceiling = float(result.data.get("ceiling", {}).get("pgbench_tps") or 0)
    model = result.source == "sim"
    intro = (
        "<p>A PgBouncer pool of {pool} server connections, each new one costing {lat:.0f} ms, "
        "serves {workers} workers running {qt:.0f} ms queries with a {dl:.0f} ms deadline; "
        "{burst}. {where}</p>").format(
        pool=_num(config.get("pool_size", "?")),
        lat=float(config.get("connect_latency", 0)) * 1000,
        workers=_num(config.get("workers", "?")), qt=float(config.get("query_time", 0)) * 1000,
        dl=float(config.get("deadline", 0)) * 1000,
        burst=(f"{_num(config.get('burst_workers'))} more join from "
               f"{_num(config.get('burst_start'))} s to {_num(config.get('burst_end'))} s")
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
            return _num(round(avg([float(r.get("totals", {}).get(key) or 0) for r in runs])))
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


# -- lock queue -----------------------------------------------------------------------------------

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
               f"{_num(run.get('restarts'))} replica restarts; connections "
               f"{'exhausted' if run.get('connections_exhausted') else 'never exhausted'}; "
               f"migration {mig} after {_num(migration.get('tries'))} tries"
               f"{', its blocker named' if migration.get('blocker_named') else ''}.")
    keys = ("t", "ok", "failed", "timed_out", "p99_ms", "sessions", "queued_on_lock",
            "lock_queue_orgs", "left_behind", "refused", "restarts", "replicas_ready")
    data = table(keys, ([_num(_by_class(r, k)) if k in ("ok", "failed", "timed_out")
                         else _num(r.get(k))
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


def lock_queue(result: Result, anchor: str) -> str:
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
                     _num(sum(int(r.get("restarts") or 0) for r in runs)),
                     f"{sum(bool(r.get('connections_exhausted')) for r in runs)}/{len(runs)}",
                     f"{applied}/{len(runs)}"])
    summary = table(["strategy", "verdicts", "uncached lookups answered", "restarts (all runs)",
                     "connections exhausted", "migration applied"], rows,
                    caption="Per strategy, over all runs", numeric_from=2)
    return (f"{intro}{versions_line(result)}{config_list(config)}{look}{''.join(charts)}"
            f"{summary}")


# -- anything else --------------------------------------------------------------------------------

def generic(result: Result, anchor: str) -> str:
    """A scenario this page has no renderer for: its settings and its runs' verdicts."""
    rows = [[escape(str(r.get("strategy", "?"))), _num(r.get("run")), badge(verdict_of(r))]
            for r in result.runs]
    runs = table(["strategy", "run", "verdict"], rows, numeric_from=1) if rows else ""
    config = result.data.get("config", {})
    return (f"<p>This pgsteady has no chart for the scenario "
            f"<code>{escape(result.scenario)}</code>; its settings and verdicts follow.</p>"
            f"{versions_line(result)}{config_list(config) if isinstance(config, dict) else ''}"
            f"{runs}")
