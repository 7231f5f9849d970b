"""What every scenario's report shares: matplotlib without a display, the PNG files' names,
titles in the verdict's colour, and the JSON file. Renderers only read results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from pgsteady import _verdicts
from pgsteady._extras import require


class Run(Protocol):
    strategy: str
    run: int


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files, no display), imported only when charts
    are asked for: the lab's tables and JSON need no matplotlib."""
    matplotlib = require("matplotlib", extra="lab", feature="the lab's charts")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path) -> Path:
    """Write ``fig`` as ``path`` and free it (pyplot keeps every open figure otherwise)."""
    fig.savefig(path)
    pyplot().close(fig)
    return path


def run_path(out: Path, scenario: str, run: Run) -> Path:
    """``pool-drain-steady.png`` for run 1, ``pool-drain-steady-run2.png`` after it."""
    suffix = "" if run.run == 1 else f"-run{run.run}"
    return out / f"{scenario}-{run.strategy}{suffix}.png"


def verdict_title(ax: Any, text: str, verdict: str, fontsize: float = 9) -> None:
    """The chart's title in its verdict's colour (:mod:`pgsteady._verdicts`)."""
    ax.set_title(text, fontsize=fontsize, color=_verdicts.colour(verdict))


def write_json(document: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
