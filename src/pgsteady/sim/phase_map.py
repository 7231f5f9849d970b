"""Where pools collapse: the probability of collapse over a grid of two knobs, per strategy
(as JSON; :func:`pgsteady.sim.report.write_phase_map` draws one heatmap per strategy).

Cells are independent, so ``jobs`` > 1 spreads them over processes; each cell's runs use the
same seeds whatever the order, so the map is the same however it was computed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

from pgsteady.errors import UsageError
from pgsteady.settings import parse_duration
from pgsteady.sim.config import SimConfig
from pgsteady.sim.run import simulate

SCHEMA_VERSION = 1
MAX_CELLS = 2500
# Knob on the command line -> (SimConfig field, kind).
AXES: dict[str, tuple[str, str]] = {
    "pool-size": ("pool_size", "int"),
    "connect-latency": ("connect_latency", "duration"),
    "deadline": ("deadline", "duration"),
    "burst": ("burst_workers", "int"),
    "query-time": ("query_time", "duration"),
    "poolers": ("poolers", "int"),
    "workers": ("workers", "int"),
    "query-wait-timeout": ("query_wait_timeout", "duration"),
    "think-time": ("think_time", "duration"),
}


@dataclass(frozen=True)
class Axis:
    knob: str
    field: str
    kind: str
    values: tuple[float, ...]

    def label(self, value: float) -> str:
        if self.kind == "duration":
            return f"{value * 1000:.3g} ms" if value < 1 else f"{value:.3g} s"
        return str(int(value))


def parse_axis(text: str, steps: int, base: SimConfig | None = None) -> Axis:
    """``pool-size=2:40`` -> ``steps`` values from 2 to 40, spaced geometrically (the
    interesting part of a pool size or a latency is near its low end), plus the base
    setting's own value when it lies inside, so the map has a cell at the marked point."""
    knob, _, span = text.partition("=")
    knob = knob.strip()
    if knob not in AXES:
        raise UsageError(f"unknown phase-map knob {knob!r}; choose from {', '.join(AXES)} "
                         f"(written like pool-size=2:40)")
    field, kind = AXES[knob]
    low_text, sep, high_text = span.partition(":")
    if not sep:
        raise UsageError(f"{text!r}: write the range as {knob}=LOW:HIGH")
    try:
        low, high = (_value(kind, low_text), _value(kind, high_text))
    except ValueError as exc:
        raise UsageError(f"{text!r}: {exc}") from None
    if not low < high:
        raise UsageError(f"{text!r}: the range must go from low to high")
    last = max(1, steps - 1)
    if low > 0:
        values = [low * (high / low) ** (i / last) for i in range(steps)]
    else:
        values = [low + (high - low) * i / last for i in range(steps)]
    if base is not None:
        marked = float(getattr(base, field))
        if low <= marked <= high:
            values.append(marked)
    digits = 0 if kind == "int" else 6
    values = [float(round(v, digits)) for v in values]
    return Axis(knob, field, kind, tuple(sorted(set(values))))


def _value(kind: str, text: str) -> float:
    if kind == "duration":
        try:
            return parse_duration(text)
        except UsageError as exc:
            raise ValueError(str(exc)) from None
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if number < 0:
        raise ValueError(f"{text!r} must be 0 or more")
    return float(number)


@dataclass
class PhaseMap:
    base: SimConfig
    x: Axis
    y: Axis
    # strategy -> rows (one per y value) of collapse probabilities (one per x value)
    probability: dict[str, list[list[float]]]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION, "scenario": "phase-map", "source": "sim",
            "config": {**asdict(self.base.lab_config()),
                       "strategies": list(self.base.strategies), **self.base.model_knobs()},
            "x": {"knob": self.x.knob, "values": [_num(v) for v in self.x.values]},
            "y": {"knob": self.y.knob, "values": [_num(v) for v in self.y.values]},
            "runs": self.base.runs,
            "collapse_probability": self.probability,
        }


def _num(value: float) -> float | int:
    return int(value) if value == int(value) and value >= 1 else round(value, 6)


def cell_config(base: SimConfig, x: Axis, xv: float, y: Axis, yv: float) -> SimConfig:
    """The base setting with the two knobs of one cell (checked like any other setting)."""
    changes: dict[str, Any] = {}
    for axis, value in ((x, xv), (y, yv)):
        changes[axis.field] = int(value) if axis.kind == "int" else value
    if "pool_size" in changes and base.min_pool_size is not None:
        changes["min_pool_size"] = min(base.min_pool_size, changes["pool_size"])
    return replace(base, **changes)


def _cell(args: tuple[SimConfig, str]) -> float:
    config, strategy = args
    collapsed = sum(simulate(config, strategy, run)[0].collapsed
                    for run in range(1, config.runs + 1))
    return collapsed / config.runs


def run_phase_map(base: SimConfig, x: Axis, y: Axis, *, jobs: int = 1,
                  progress: Callable[[int, int], None] | None = None) -> PhaseMap:
    if x.field == y.field:
        raise UsageError("--x and --y must be different knobs")
    cells = len(x.values) * len(y.values) * len(base.strategies)
    if cells > MAX_CELLS:
        raise UsageError(f"{cells} cells is more than {MAX_CELLS}; lower --steps")
    work = [(cell_config(base, x, xv, y, yv), strategy)
            for strategy in base.strategies for yv in y.values for xv in x.values]
    results: list[float] = []
    for done, value in enumerate(_map(work, jobs), start=1):
        results.append(value)
        if progress:
            progress(done, len(work))
    probability: dict[str, list[list[float]]] = {}
    width = len(x.values)
    per_strategy = width * len(y.values)
    for index, strategy in enumerate(base.strategies):
        flat = results[index * per_strategy:(index + 1) * per_strategy]
        probability[strategy] = [flat[row * width:(row + 1) * width]
                                 for row in range(len(y.values))]
    return PhaseMap(base, x, y, probability)


def _map(work: list[tuple[SimConfig, str]], jobs: int) -> Iterator[float]:
    if jobs <= 1:
        yield from map(_cell, work)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(_cell, work, chunksize=1)
