"""`pgsteady sim validate --quick`: the model against a real lab run of the seed's cell."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from pgsteady.cli.sim import _validate_json_path
from pgsteady.lab.scenarios.pool_drain import RunResult, _pgbench_latencies
from pgsteady.sim.config import SimConfig, quantile, round_trips_from_holds
from pgsteady.sim.server import Server
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


def test_round_trips_are_drawn_from_the_measured_holds():
    """Holds measured with one client per server connection, less the query time, are what
    the model draws its round trips from: same median, same mean, same tail; too few holds
    give nothing."""
    rng = random.Random(3)
    holds = [0.0053 + rng.random() * 0.0004 for _ in range(990)] + [0.02] * 10
    samples = round_trips_from_holds(holds, 0.005)
    assert samples is not None and len(samples) == 1000
    assert quantile(samples, 0.5) == pytest.approx(0.0005, rel=0.05)
    config = SimConfig(round_trip_samples=samples)
    assert config.mean_round_trip == pytest.approx(sum(holds) / 1000 - 0.005)
    assert config.model_knobs()["round_trip_samples"] == 1000
    server = Server(config, random.Random(5), [])
    trips = sorted(server.query_hold() - 0.005 for _ in range(20000))
    assert trips[10000] == pytest.approx(0.0005, rel=0.05)
    assert 0.008 < sum(t > 0.01 for t in trips) / len(trips) < 0.012  # the hiccups, 1 %
    assert round_trips_from_holds(holds[:50], 0.005) is None


def test_validate_writes_json_where_asked():
    """--json FILE wins; --out DIR alone or with a bare --json writes DIR/sim-validate.json;
    a bare --json alone means stdout."""
    assert _validate_json_path("a.json", "dir") == "a.json"
    assert _validate_json_path(None, "dir") == str(Path("dir") / "sim-validate.json")
    assert _validate_json_path("", "dir") == str(Path("dir") / "sim-validate.json")
    assert _validate_json_path("", None) == "-"
    assert _validate_json_path(None, None) is None


@pytest.mark.lab
@pytest.mark.slow
def test_quick_validation_agrees_with_the_lab(tmp_path):
    """Pools of 2 and 4 (the seed's) at 50 ms, one short run per strategy in the lab and the
    model, the model's round trip (median and tail) measured on the lab's path: both see naive
    collapse and steady not; the model opens a similar number of server connections. (Answers
    per second are compared in the full grid: on a shared 2-core machine a single short lab
    run is too noisy to hold to 10%.)"""
    out = tmp_path / "report"
    result = subprocess.run([*PGSTEADY, "sim", "validate", "--quick", "--json", "--out",
                             str(out)],
                            capture_output=True, text=True, timeout=240,
                            env={**os.environ, "NO_COLOR": "1"}, check=False)
    assert result.returncode in (0, 1), result.stderr
    document = json.loads((out / "sim-validate.json").read_text())
    assert document["scenario"] == "sim-validate" and document["schema_version"] == 1
    for cell in document["cells"]:
        assert cell["calibrated_round_trip_p99"] >= cell["calibrated_round_trip"] > 0
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


def test_pgbench_transaction_logs_give_each_querys_latency(tmp_path):
    """The lab reads the latency column (microseconds) of pgbench's per-transaction logs, from
    every thread's file, and nothing else in the folder."""
    (tmp_path / "tx.4242").write_text("0 0 5500 0 1700000000 1000\n1 0 6100 0 1700000000 7000\n")
    (tmp_path / "tx.4242.1").write_text("2 0 12000 0 1700000000 9000\n")
    (tmp_path / "query.sql").write_text("SELECT 1;\n")
    assert sorted(_pgbench_latencies(str(tmp_path))) == pytest.approx([0.0055, 0.0061, 0.012])
