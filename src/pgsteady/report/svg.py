"""Inline SVG charts for the HTML report.

Written by hand rather than with matplotlib's SVG backend: the page must be one file with no
external requests, readable on a phone and with scripts off, so each chart is a small
``viewBox`` SVG that scales to its container, carries a ``<title>`` per second (the browser
shows the values on hover, no script needed), draws with CSS classes (one palette, print- and
dark-mode aware) and marks its "bad" series with a hatch as well as a colour. matplotlib's SVG
is ~100 kB a chart of absolute-positioned paths with none of that.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from pgsteady.report.safe import Kind, css_class, html_id

WIDTH = 720
HEIGHT = 300
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 14, 44
DASH = "&#8211;"


@dataclass(frozen=True)
class Series:
    """One named row of values, one per second; ``kind`` picks its CSS class."""

    label: str
    values: Sequence[float]
    kind: Kind


@dataclass(frozen=True)
class Band:
    """A shaded stretch of time (a burst, a long query) with its label."""

    label: str
    start: float
    end: float
    kind: Kind = "band"


@dataclass(frozen=True)
class Marker:
    """A vertical line at one instant (a stall, a restart)."""

    label: str
    at: float
    kind: Kind = "marker"


@dataclass(frozen=True)
class Level:
    """A horizontal reference line (the pgbench ceiling, max_connections)."""

    label: str
    value: float
    kind: Kind = "level"


@dataclass
class TimeChart:
    """Stacked bars per second, lines over them, and reference bands, markers and levels."""

    title: str
    y_label: str
    seconds: int
    bars: list[Series] = field(default_factory=list)
    lines: list[Series] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    levels: list[Level] = field(default_factory=list)
    unit: str = ""

    def y_max(self) -> float:
        stacked = [sum(s.values[i] for s in self.bars if i < len(s.values))
                   for i in range(self.seconds)]
        candidates = [*stacked, *(v for s in self.lines for v in s.values),
                      *(level.value for level in self.levels), 1.0]
        return max(candidates)

    def legend(self) -> list[tuple[Kind, str]]:
        """(kind, label) pairs in drawing order, for the HTML legend beside the chart."""
        return ([(s.kind, s.label) for s in self.bars] + [(s.kind, s.label) for s in self.lines]
                + [(b.kind, b.label) for b in self.bands]
                + [(m.kind, m.label) for m in self.markers]
                + [(lv.kind, lv.label) for lv in self.levels])


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top`` (1-2-5 steps)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks = [0.0]
    while ticks[-1] < top:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _fmt(value: float) -> str:
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.1f}"


def render_time_chart(chart: TimeChart, chart_name: str) -> str:
    """The chart as an ``<svg>`` element (role img, titled, described by its caption).

    ``chart_name`` may come from the input (a strategy's name); its ids are a safe slug of it.
    """
    chart_id = html_id(chart_name)
    ticks = nice_ticks(chart.y_max())
    top = ticks[-1]
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    n = max(chart.seconds, 1)
    slot = plot_w / n

    def x(t: float) -> float:
        return LEFT + t * slot

    def y(v: float) -> float:
        return TOP + plot_h - (v / top) * plot_h

    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
           f'aria-labelledby="{chart_id}-t" preserveAspectRatio="xMidYMid meet" '
           f'xmlns="http://www.w3.org/2000/svg">',
           f'<title id="{chart_id}-t">{escape(chart.title)}</title>',
           '<defs><pattern id="hatch-' + chart_id + '" width="6" height="6" '
           'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
           '<line x1="0" y1="0" x2="0" y2="6" class="hatch"/></pattern></defs>']
    # Each kind of band in a lane of its own: drawn over one another, the later one (the
    # migration's wait) hid the earlier (the long log query it waits behind).
    lanes = list(dict.fromkeys(band.kind for band in chart.bands))
    lane_h = plot_h / max(len(lanes), 1)
    for band in chart.bands:
        lane_y = TOP + lanes.index(band.kind) * lane_h
        out.append(f'<rect class="{css_class(band.kind)}" x="{x(band.start):.1f}" '
                   f'y="{lane_y:.1f}" width="{max(x(band.end) - x(band.start), 1):.1f}" '
                   f'height="{lane_h:.1f}">'
                   f'<title>{escape(band.label)}: {_fmt(band.start)}{DASH}{_fmt(band.end)} s'
                   '</title></rect>')
    for tick in ticks:
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" '
                   f'y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
                   f'<text class="tick" x="{LEFT - 6}" y="{y(tick) + 4:.1f}" '
                   f'text-anchor="end">{_fmt(tick)}</text>')
    every = max(1, math.ceil(n / 12))
    for t in range(0, n + 1, every):
        out.append(f'<text class="tick" x="{x(t):.1f}" y="{HEIGHT - BOTTOM + 18}" '
                   f'text-anchor="middle">{t}</text>')
    out.append(f'<text class="axis" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 4}" '
               'text-anchor="middle">seconds</text>')
    out.append(f'<text class="axis" transform="translate(12 {TOP + plot_h / 2:.1f}) '
               f'rotate(-90)" text-anchor="middle">{escape(chart.y_label)}</text>')
    for t in range(chart.seconds):
        parts = [f"{s.label} {_fmt(s.values[t])}{chart.unit}" for s in chart.bars + chart.lines
                 if t < len(s.values)]
        out.append(f'<g class="second"><title>{t}{DASH}{t + 1} s: '
                   f'{escape(", ".join(parts))}</title>')
        out.append(f'<rect class="hover" x="{x(t):.1f}" y="{TOP}" width="{slot:.1f}" '
                   f'height="{plot_h}"/>')
        base = 0.0
        for series in chart.bars:
            value = series.values[t] if t < len(series.values) else 0
            if value > 0:
                # A presentation attribute, not style=: the CSP allows no inline styles.
                fill = f' fill="url(#hatch-{chart_id})"' if series.kind == "bad-hatch" else ""
                out.append(f'<rect class="{css_class(series.kind)}"{fill} '
                           f'x="{x(t) + slot * 0.1:.1f}" y="{y(base + value):.1f}" '
                           f'width="{slot * 0.8:.1f}" '
                           f'height="{max(y(base) - y(base + value), 0.5):.1f}"/>')
            base += value
        out.append("</g>")
    for level in chart.levels:
        out.append(f'<line class="{css_class(level.kind)}" x1="{LEFT}" x2="{WIDTH - RIGHT}" '
                   f'y1="{y(level.value):.1f}" y2="{y(level.value):.1f}">'
                   f'<title>{escape(level.label)}</title></line>')
    for series in chart.lines:
        points = " ".join(f"{x(t + 0.5):.1f},{y(v):.1f}"
                          for t, v in enumerate(series.values[:chart.seconds]))
        out.append(f'<polyline class="{css_class(series.kind)}" points="{points}">'
                   f'<title>{escape(series.label)}</title></polyline>')
    for marker in chart.markers:
        out.append(f'<line class="{css_class(marker.kind)}" x1="{x(marker.at):.1f}" '
                   f'x2="{x(marker.at):.1f}" y1="{TOP}" y2="{TOP + plot_h}">'
                   f'<title>{escape(marker.label)} at {_fmt(marker.at)} s</title></line>')
    out.append(f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}"/>')
    out.append("</svg>")
    return "\n".join(out)


@dataclass(frozen=True)
class Heatmap:
    """Probabilities on a grid: ``values[row][col]`` for ``y_values[row]`` x ``x_values[col]``."""

    title: str
    x_label: str
    y_label: str
    x_values: Sequence[str]
    y_values: Sequence[str]
    values: Sequence[Sequence[float | None]]
    mark: tuple[int, int] | None = None   # (row, col) of the seed's point


def render_heatmap(chart: Heatmap, chart_name: str) -> str:
    """Cells shaded by probability, each also printed as a number (colour is not the only cue).

    ``chart_name`` may come from the input (a strategy's name); its ids are a safe slug of it.
    """
    chart_id = html_id(chart_name)
    cols, rows = len(chart.x_values), len(chart.y_values)
    left, bottom, top, right = 70, 44, 10, 10
    cell_w = (WIDTH - left - right) / max(cols, 1)
    height = max(160, min(560, rows * 26 + top + bottom))
    cell_h = (height - top - bottom) / max(rows, 1)
    out = [f'<svg class="chart heatmap" viewBox="0 0 {WIDTH} {height}" role="img" '
           f'aria-labelledby="{chart_id}-t" xmlns="http://www.w3.org/2000/svg">',
           f'<title id="{chart_id}-t">{escape(chart.title)}</title>']
    for r, row in enumerate(chart.values):
        y0 = top + (rows - 1 - r) * cell_h   # first row at the bottom, like a plot
        for c, value in enumerate(row):
            x0 = left + c * cell_w
            label = "n/a" if value is None else f"{value:.0%}"
            shade = 0 if value is None else min(max(value, 0.0), 1.0)
            out.append(f'<g><title>{escape(chart.x_label)} {escape(chart.x_values[c])}, '
                       f'{escape(chart.y_label)} {escape(chart.y_values[r])}: '
                       f'collapse {label}</title>'
                       f'<rect class="cell" x="{x0:.1f}" y="{y0:.1f}" width="{cell_w:.1f}" '
                       f'height="{cell_h:.1f}" fill-opacity="{0.08 + 0.92 * shade:.2f}"/>')
            if cell_w >= 22 and cell_h >= 12:
                cls = "cell-text dark" if shade > 0.55 else "cell-text"
                out.append(f'<text class="{cls}" x="{x0 + cell_w / 2:.1f}" '
                           f'y="{y0 + cell_h / 2 + 4:.1f}" text-anchor="middle">'
                           f'{"" if value is None else round(value * 100)}</text>')
            out.append("</g>")
    if chart.mark is not None:
        r, c = chart.mark
        out.append(f'<rect class="seed-mark" x="{left + c * cell_w + 1:.1f}" '
                   f'y="{top + (rows - 1 - r) * cell_h + 1:.1f}" width="{cell_w - 2:.1f}" '
                   f'height="{cell_h - 2:.1f}"><title>the outage\'s setting</title></rect>')
    step_x = max(1, math.ceil(cols / 10))
    for c in range(0, cols, step_x):
        out.append(f'<text class="tick" x="{left + (c + 0.5) * cell_w:.1f}" '
                   f'y="{height - bottom + 16}" text-anchor="middle">'
                   f'{escape(chart.x_values[c])}</text>')
    step_y = max(1, math.ceil(rows / 12))
    for r in range(0, rows, step_y):
        out.append(f'<text class="tick" x="{left - 6}" '
                   f'y="{top + (rows - 1 - r + 0.5) * cell_h + 4:.1f}" text-anchor="end">'
                   f'{escape(chart.y_values[r])}</text>')
    out.append(f'<text class="axis" x="{left + (WIDTH - left - right) / 2:.1f}" '
               f'y="{height - 6}" text-anchor="middle">{escape(chart.x_label)}</text>')
    middle = top + (height - top - bottom) / 2
    out.append(f'<text class="axis" transform="translate(12 {middle:.1f}) rotate(-90)" '
               f'text-anchor="middle">{escape(chart.y_label)}</text>')
    out.append("</svg>")
    return "\n".join(out)
