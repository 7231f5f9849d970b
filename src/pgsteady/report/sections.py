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

def num(value: Any) -> str:
    """A value as the page shows it (escaped; numbers grouped, floats trimmed)."""
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
    return num(value)


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


# -- anything else --------------------------------------------------------------------------------

def generic(result: Result, anchor: str) -> str:
    """A scenario this page has no renderer for: its settings and its runs' verdicts."""
    rows = [[escape(str(r.get("strategy", "?"))), num(r.get("run")), badge(verdict_of(r))]
            for r in result.runs]
    runs = table(["strategy", "run", "verdict"], rows, numeric_from=1) if rows else ""
    config = result.data.get("config", {})
    return (f"<p>This pgsteady has no chart for the scenario "
            f"<code>{escape(result.scenario)}</code>; its settings and verdicts follow.</p>"
            f"{versions_line(result)}{config_list(config) if isinstance(config, dict) else ''}"
            f"{runs}")
