"""The alert rules of :mod:`.alerts`, evaluated in-process over a series of scrapes.

``pgsteady watch`` shows which rules are pending or firing, and for how long, without a
Prometheus: each :class:`~pgsteady.inspect.alerts.Rule` is computed here from the exporter's
values the way its PromQL computes it (``max by``, ``min by``, ratio of sums, per-minute rate
and increase of a counter over the rule's window), and a rule's labels are pending from the
first evaluation its condition holds until its ``for`` has passed, then firing. Rules whose
metric is not in the scrapes (client pools, migrations, kube-state-metrics, node_exporter,
probes) have no data. A rule's ``selector`` keeps the series whose labels match it, as
PromQL's does (``=``, ``!=``, ``=~``, ``!~``; regexes anchored).
"""

from __future__ import annotations

import itertools
import operator
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pgsteady.inspect.alerts import RULES, AlertConfig, Rule
from pgsteady.inspect.exporter import Labels, Values

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "==": operator.eq, "<": operator.lt,
    "<=": operator.le, "!=": operator.ne}
_UNITS = {"s": 1, "m": 60, "h": 3600}
MAX_HISTORY = 4096  # points kept per counter series (bounded even at a very short interval)


_MATCHER = re.compile(r'\s*(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


def window_seconds(window: str) -> float:
    return float(window[:-1]) * _UNITS[window[-1]]


@dataclass(frozen=True)
class Matcher:
    """One label matcher of a PromQL selector."""

    name: str
    op: str  # = != =~ !~
    value: str

    def __call__(self, labels: Mapping[str, str]) -> bool:
        got = labels.get(self.name, "")  # a missing label matches as "", as in PromQL
        if self.op in ("=~", "!~"):
            return (re.fullmatch(f"(?:{self.value})", got) is not None) == (self.op == "=~")
        return (got == self.value) == (self.op == "=")


def matchers(selector: str) -> list[Matcher]:
    """A selector such as ``{phase=~"queued|connecting"}`` as its matchers."""
    return [Matcher(name, op, text.replace('\\"', '"'))
            for name, op, text in _MATCHER.findall(selector.strip().strip("{}"))]


def select(selector: str, series: list[tuple[Labels, float]]) -> list[tuple[Labels, float]]:
    """The series whose labels match ``selector`` (all of them when it is empty)."""
    tests = matchers(selector)
    return [(labels, value) for labels, value in series
            if all(test(dict(labels)) for test in tests)]


@dataclass(frozen=True)
class Active:
    """A rule's label set whose condition holds: pending until its ``for`` has passed."""

    alert: str
    severity: str
    labels: Labels
    value: float
    since: float  # time.monotonic() of the first evaluation where it held
    for_seconds: float
    now: float

    @property
    def active_for(self) -> float:
        return self.now - self.since

    @property
    def state(self) -> str:
        return "firing" if self.active_for >= self.for_seconds else "pending"

    def as_dict(self) -> dict[str, object]:
        return {"alert": self.alert, "severity": self.severity, "labels": dict(self.labels),
                "state": self.state, "value": round(self.value, 4),
                "active_for_s": round(self.active_for, 1), "for_s": self.for_seconds}


@dataclass(frozen=True)
class Evaluation:
    active: tuple[Active, ...]
    no_data: tuple[str, ...]  # alerts whose metric is absent
    quiet: tuple[str, ...]  # alerts with data and nothing active


class Evaluator:
    """Feed it each scrape's values with :meth:`update`; it keeps counter histories and
    pending-since times between calls."""

    def __init__(self, config: AlertConfig | None = None, rules: Iterable[Rule] = RULES) -> None:
        self.config = config or AlertConfig()
        self.rules = tuple(rules)
        self._history: dict[tuple[str, Labels], deque[tuple[float, float]]] = {}
        self._since: dict[tuple[str, Labels], float] = {}
        self._counters: dict[str, float] = {}
        for rule in self.rules:
            if rule.kind in ("per_minute", "increase", "busy"):
                self._counters[rule.metric] = max(self._counters.get(rule.metric, 0.0),
                                                  window_seconds(rule.window))

    def _remember(self, now: float, values: Values) -> None:
        for metric, keep in self._counters.items():
            for labels, value in values.get(metric, []):
                points = self._history.setdefault((metric, labels), deque(maxlen=MAX_HISTORY))
                points.append((now, value))
                while points and points[0][0] < now - keep - 1:
                    points.popleft()

    def increase(self, metric: str, labels: Labels, window: float, now: float) -> float | None:
        """A counter's increase over the last ``window`` seconds (resets counted from 0)."""
        points = [p for p in self._history.get((metric, labels), ()) if p[0] >= now - window]
        if len(points) < 2:
            return None
        total = 0.0
        for (_, a), (_, b) in itertools.pairwise(points):
            total += b - a if b >= a else b
        return total

    def per_minute(self, metric: str, labels: Labels, window: float, now: float) -> float | None:
        """A counter's rate over the last ``window`` seconds, per minute."""
        points = [p for p in self._history.get((metric, labels), ()) if p[0] >= now - window]
        grew = self.increase(metric, labels, window, now)
        if grew is None or points[-1][0] <= points[0][0]:
            return None
        return grew / (points[-1][0] - points[0][0]) * 60

    def _group(self, rule: Rule, series: list[tuple[Labels, float]]) \
            -> dict[Labels, list[float]]:
        groups: dict[Labels, list[float]] = {}
        for labels, value in series:
            as_dict = dict(labels)
            # A label a series lacks is left out, as PromQL's `by` leaves it out.
            key = tuple((name, as_dict[name]) for name in rule.by if name in as_dict)
            groups.setdefault(key, []).append(value)
        return groups

    def _values(self, rule: Rule, values: Values, now: float) -> dict[Labels, float] | None:
        series = values.get(rule.metric)
        if series is not None and rule.selector:
            series = select(rule.selector, series) or None
        if rule.kind == "absent":  # fires (value 1) while no series of the metric exists
            return {} if series else {(): 1.0}
        if series is None:
            return None
        if rule.kind in ("per_minute", "increase", "busy"):
            window = window_seconds(rule.window)
            how = self.increase if rule.kind == "increase" else self.per_minute
            rated = [(labels, how(rule.metric, labels, window, now)) for labels, _ in series]
            series = [(labels, v) for labels, v in rated if v is not None]
            if rule.kind == "busy":  # idle seconds per second, averaged over a host's CPUs
                return {k: 1 - sum(v) / len(v) / 60
                        for k, v in self._group(rule, series).items()}
            return {k: sum(v) for k, v in self._group(rule, series).items()}
        if rule.kind == "age":  # a Unix timestamp: compared with the wall clock, as time()
            wall = time.time()
            return {k: wall - max(v) for k, v in self._group(rule, series).items()}
        if rule.kind == "ratio":
            below = values.get(rule.denominator)
            if below is None:
                return None
            tops = {k: sum(v) for k, v in self._group(rule, series).items()}
            bottoms = {k: sum(v) for k, v in self._group(rule, below).items()}
            return {k: tops[k] / bottoms[k] for k in tops if bottoms.get(k)}
        pick: Callable[[Iterable[float]], float] = min if rule.kind == "min" else max
        return {k: pick(v) for k, v in self._group(rule, series).items()}

    def update(self, values: Values, now: float) -> Evaluation:
        """Evaluate every rule on one scrape taken at ``now`` (``time.monotonic()``)."""
        self._remember(now, values)
        active: list[Active] = []
        no_data: list[str] = []
        quiet: list[str] = []
        still: dict[tuple[str, Labels], float] = {}
        for rule in self.rules:
            computed = self._values(rule, values, now)
            if computed is None:
                no_data.append(rule.alert)
                continue
            threshold = self.config.threshold(rule)
            hits = 0
            for labels, value in sorted(computed.items()):
                if not _OPS[rule.op](value, threshold):
                    continue
                key = (rule.alert, labels)
                still[key] = self._since.get(key, now)
                active.append(Active(rule.alert, rule.severity, labels, value, still[key],
                                     self.config.for_seconds(rule), now))
                hits += 1
            if not hits:
                quiet.append(rule.alert)
        self._since = still
        active.sort(key=lambda a: (a.state != "firing", a.severity != "critical", -a.active_for))
        return Evaluation(tuple(active), tuple(no_data), tuple(quiet))
