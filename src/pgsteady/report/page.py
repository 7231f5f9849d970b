"""The report page: verdicts up top, one section per result, everything inline.

No external request of any kind (a Content-Security-Policy forbids them, so a regression shows
up as a console error in the browser test rather than as a silent fetch), and no script or
style but the page's own: the input files are untrusted, so every value from them is escaped
(``safe``) and the policy allows only the inline script and style below, by hash. Readable with
scripts off, on a 390 px phone and in print. The one script adds what native SVG ``<title>``
tooltips cannot: tap or hover a second and its values show under the chart (phones have no
hover).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from html import escape
from typing import TypeVar

from pgsteady._version import __version__
from pgsteady.errors import UsageError
from pgsteady.lab.scenarios import registry
from pgsteady.report import model_sections, safe, sections
from pgsteady.report.inputs import Result

T = TypeVar("T")

STYLE = """
:root{--fg:#1b1b1b;--muted:#5f6368;--bg:#fff;--line:#d0d4d9;--good:#2e7d32;--good2:#66bb6a;
--good3:#a5d6a7;--bad:#c62828;--warn:#b26a00;--blue:#1565c0;--band:#fff3e0;--band2:#e3f2fd;
--purple:#6a1b9a}
@media (prefers-color-scheme:dark){:root{--fg:#e8eaed;--muted:#aab;--bg:#16181b;--line:#3a3f45;
--band:#3a2e1c;--band2:#1c2a3a;--blue:#64b5f6;--purple:#ce93d8;--good:#66bb6a;--bad:#ef5350}}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:var(--bg)}
main{max-width:64rem;margin:0 auto;padding:1rem}
h1{font-size:1.6rem;margin:.5rem 0}h2{font-size:1.3rem;margin-top:2.5rem;border-bottom:1px solid
var(--line);padding-bottom:.2rem}
p,li,dd,dt{overflow-wrap:anywhere}
.meta,.versions,figcaption{color:var(--muted);font-size:.9rem}
code{font-size:.9em}
.scroll{overflow-x:auto;max-width:100%;margin:1rem 0}
table{border-collapse:collapse;font-size:.9rem;min-width:100%}
caption{text-align:left;color:var(--muted);padding:.2rem 0}
th,td{border-bottom:1px solid var(--line);padding:.3rem .5rem;text-align:left;vertical-align:top}
th.n,td.n{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;border-radius:.3rem;padding:0 .4rem;font-weight:600;
white-space:nowrap;border:1px solid currentColor}
.badge.good{color:var(--good)}.badge.bad{color:var(--bad)}.badge.warn{color:var(--warn)}
dl.config{display:grid;grid-template-columns:repeat(auto-fill,minmax(11rem,1fr));gap:.2rem 1rem;
font-size:.85rem;margin:.5rem 0}
dl.config div{display:flex;justify-content:space-between;gap:.5rem;border-bottom:1px dotted
var(--line)}
dt{color:var(--muted)}dd{margin:0;text-align:right}
figure{margin:1.5rem 0;break-inside:avoid}
svg.chart{display:block;width:100%;height:auto;max-height:70vh}
svg text{fill:var(--fg);font:11px system-ui,sans-serif}svg .axis{font-size:12px}
.grid{stroke:var(--line);stroke-width:.5}.frame{fill:none;stroke:var(--line)}
.hover{fill:transparent}.second:hover .hover,.second.on .hover{fill:var(--line);opacity:.5}
rect.good,.key.good{fill:var(--good);background:var(--good)}
rect.good2,.key.good2{fill:var(--good2);background:var(--good2)}
rect.good3,.key.good3{fill:var(--good3);background:var(--good3)}
.key.bad-hatch{background:repeating-linear-gradient(45deg,var(--bad) 0 3px,transparent 3px 6px);
border:1px solid var(--bad)}
.hatch{stroke:var(--bad);stroke-width:4}
rect.muted,.key.muted{fill:#9e9e9e;background:#9e9e9e}
polyline.line{fill:none;stroke:var(--blue);stroke-width:2}.key.line{background:var(--blue);
height:.25rem}
polyline.line-bad{fill:none;stroke:var(--bad);stroke-width:2;stroke-dasharray:2 2}
.key.line-bad{border-top:.2rem dotted var(--bad);height:0}
rect.band,.key.band{fill:var(--band);background:var(--band)}
rect.band2,.key.band2{fill:var(--band2);background:var(--band2);opacity:.8}
line.marker{stroke:var(--warn);stroke-width:1.5;stroke-dasharray:3 3}
line.marker-bad{stroke:var(--bad);stroke-width:2}
.key.marker-bad{border-left:.2rem solid var(--bad);width:.2rem}
polyline.line-warn{fill:none;stroke:var(--warn);stroke-width:2;stroke-dasharray:6 2}
.key.line-warn{border-top:.2rem dashed var(--warn);height:0}
.key.marker{border-left:.2rem dashed var(--warn);width:.2rem}
line.level{stroke:var(--purple);stroke-width:1.5;stroke-dasharray:6 4}
.key.level{border-top:.2rem dashed var(--purple);height:0}
rect.cell{fill:var(--bad)}.cell-text{font-size:10px}.cell-text.dark{fill:#fff}
rect.seed-mark{fill:none;stroke:var(--fg);stroke-width:2.5}
ul.legend{list-style:none;padding:0;margin:.3rem 0;display:flex;flex-wrap:wrap;gap:.2rem 1rem;
font-size:.85rem}
.key{display:inline-block;width:1rem;height:.8rem;margin-right:.35rem;vertical-align:middle}
.readout{min-height:1.5em;font-size:.85rem;font-variant-numeric:tabular-nums;margin:.2rem 0}
details{font-size:.85rem}summary{cursor:pointer;color:var(--muted)}
nav ul{padding-left:1.2rem}
h3{font-size:1.05rem;margin:2rem 0 .3rem}
@media (max-width:600px){svg text{font-size:19px}svg .axis{font-size:19px}.cell-text{font-size:14px}
main{padding:.6rem}}
@media print{details,.readout,nav{display:none}main{max-width:none}h2{break-before:auto}
body{font-size:11pt}}
"""

SCRIPT = """
document.querySelectorAll('figure').forEach(function (fig) {
  var out = document.createElement('p');
  out.className = 'readout';
  out.setAttribute('aria-live', 'polite');
  var svg = fig.querySelector('svg.chart');
  if (!svg) { return; }
  svg.after(out);
  function show(g) {
    fig.querySelectorAll('.second.on').forEach(function (o) { o.classList.remove('on'); });
    g.classList.add('on');
    out.textContent = g.querySelector('title').textContent;
  }
  fig.querySelectorAll('.second').forEach(function (g) {
    g.addEventListener('pointerenter', function () { show(g); });
    g.addEventListener('click', function () { show(g); });
  });
});
"""


# After STYLE and SCRIPT: the hashes are of their exact text, as it appears in the page.
CSP = safe.content_security_policy(scripts=(SCRIPT,), styles=(STYLE,))

RENDERERS: dict[str, Callable[[Result, str], str]] = {
    "phase-map": model_sections.phase_map,
    "sim-validate": model_sections.sim_validate,
}


def _from_file(result: Result, render: Callable[[Result, str], T], anchor: str) -> T:
    """``render`` on one file; a value of the wrong type there is the file's fault, not ours."""
    try:
        return render(result, anchor)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise UsageError(f"{result.path}: a field holds a value of the wrong kind ({exc}); "
                         "give files written by `pgsteady lab ... --json` or `pgsteady sim`"
                         ) from exc


def _section(result: Result, anchor: str) -> str:
    render = RENDERERS.get(result.scenario) or registry.html_section(result.scenario)
    return (render or sections.generic)(result, anchor)


def _summary_rows(result: Result, anchor: str) -> list[list[str]]:
    link = f'<a href="#{anchor}">{escape(sections.title_of(result))}</a>'
    rows = [[link, escape(name), words] for name, words in model_sections.headline(result)]
    for strategy in sections.strategies(result):
        counts = sections.verdict_counts(result, strategy)
        total = sum(counts.values())
        rows.append([link, escape(strategy),
                     ", ".join(f"{sections.badge(v)}&nbsp;in {n} of {total} "
                               f"run{'s' if total != 1 else ''}"
                               for v, n in counts.most_common())])
    return rows


def _summary(results: list[Result], anchors: list[str]) -> str:
    rows = [row for result, anchor in zip(results, anchors, strict=True)
            for row in _from_file(result, _summary_rows, anchor)]
    return sections.table(["scenario", "strategy", "verdict"], rows,
                          caption="Verdicts per scenario and strategy", numeric_from=3)


def render_page(results: list[Result], generated: dt.datetime | None = None) -> str:
    """The whole page as one HTML string."""
    when = (generated or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    anchors = [sections.anchor_of(r, i) for i, r in enumerate(results, 1)]
    cores = {str(r.data["machine"].get("cores")) for r in results
             if isinstance(r.data.get("machine"), dict)
             and r.data["machine"].get("cores") is not None}
    machine = (f"{', '.join(sorted(cores, key=lambda c: (len(c), c)))} cores" if cores
               else f"{os.cpu_count()} cores (this machine; the files do not say)")
    nav = "".join(f'<li><a href="#{a}">{escape(sections.title_of(r))}</a> '
                  f"<small>({escape(r.path.name)})</small></li>"
                  for r, a in zip(results, anchors, strict=True))
    body = "".join(
        f'<section id="{a}"><h2>{escape(sections.title_of(r))}</h2>'
        f'<p class="meta">From <code>{escape(r.path.name)}</code>.</p>'
        f"{_from_file(r, _section, a)}</section>"
        for r, a in zip(results, anchors, strict=True))
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">
<title>pgsteady lab report</title>
<style>{STYLE}</style>
</head>
<body>
<main>
<h1>pgsteady lab report</h1>
<p class="meta">Written {when} by pgsteady {escape(__version__)}; runs on {escape(machine)}.</p>
{_summary(results, anchors)}
<nav aria-label="sections"><ul>{nav}</ul></nav>
{body}
</main>
<script>{SCRIPT}</script>
</body>
</html>
"""
