"""`pgsteady sim validate --quick`: the model against a real lab run of the seed's cell."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pgsteady.lab.scenarios.pool_drain import RunResult
from pgsteady.sim.validate import QUICK, Cell, Validation, side

PGSTEADY = [sys.executable, "-m", "pgsteady"]


def _run(strategy: str, answered: list[int], collapsed: bool, opened: int = 0) -> RunResult:
    rows = [{"answered": a} for a in answered]
    return RunResult(strategy, 1, collapsed, not collapsed, rows,
                     {"server_connections_opened": opened})


def test_cells_compare_verdicts_and_answers_per_third():
    """A cell agrees on its most common verdict; answered/s is compared per third only where
    both sides hold."""
    lab = side([_run("steady", [600] * 9, False), _run("steady", [600] * 9, False)])
    model = side([_run("steady", [660] * 9, False)])
    cell = Cell(4, 0.05, 0.0, "steady", 650.0, 0.001, lab=lab, model=model)
    assert cell.verdicts_agree
    assert cell.answered_difference == pytest.approx(0.10)
    down = side([_run("naive", [600, 600, 600, 0, 0, 0, 0, 0, 0], True, opened=90)])
    collapsed = Cell(4, 0.05, 0.0, "naive", 650.0, 0.001, lab=down, model=down)
    assert collapsed.answered_difference is None
    assert down.server_connections_opened == 90
    result = Validation(QUICK, cells=[cell, collapsed])
    assert result.agreement == 1.0 and result.passed


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason=(
    "known disagreement, issue 17 left open: on a quiet machine the lab's pgbench ceiling is "
    "higher, the calibrated round trip shorter, and the model's naive recovers at the seed's "
    "pool of 4 in this 6 s run while the lab's collapses (on a loaded machine both collapse)"))
def test_quick_validation_agrees_with_the_lab(tmp_path):
    """Pools of 2 and 4 (the seed's) at 50 ms, one short run per strategy in the lab and the
    model: both see naive collapse and steady not; the model opens a similar number of server
    connections. (Answers per second are compared in the full grid: on a shared 2-core
    machine a single short lab run is too noisy to hold to 10%.)"""
    out = tmp_path / "validate.json"
    result = subprocess.run([*PGSTEADY, "sim", "validate", "--quick", "--json", str(out)],
                            capture_output=True, text=True, timeout=240,
                            env={**os.environ, "NO_COLOR": "1"}, check=False)
    assert result.returncode in (0, 1), result.stderr
    document = json.loads(out.read_text())
    assert document["scenario"] == "sim-validate" and document["schema_version"] == 1
    assert [(c["pool_size"], c["strategy"]) for c in document["cells"]] == [
        (2, "naive"), (2, "steady"), (4, "naive"), (4, "steady")]
    for cell in document["cells"]:
        naive = cell["strategy"] == "naive"
        for side_name in ("lab", "model"):
            assert cell[side_name]["collapsed"] == (1 if naive else 0), cell
        lab_opened = cell["lab"]["server_connections_opened"]
        model_opened = cell["model"]["server_connections_opened"]
        if naive:
            assert 0.5 * lab_opened <= model_opened <= 2 * lab_opened, cell
        else:
            assert lab_opened == model_opened == 0, cell
    assert "sim validate" in result.stdout
