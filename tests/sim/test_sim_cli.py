"""`pgsteady sim`: same seed, same bytes; bad knobs in one line with exit 2; phase maps."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PGSTEADY = [sys.executable, "-m", "pgsteady"]
SHORT = ["--duration", "6s", "--burst", "30@2s-4s"]


def _run(*args: str, cwd=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PGSTEADY, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}, cwd=cwd,
                          check=False)


def test_same_seed_same_output_byte_for_byte(tmp_path):
    """Two runs with the same --seed print the same tables and write the same JSON; another
    seed gives another result."""
    knobs = ["sim", "pool-drain", "--pool-size", "20", "--latency-stalls", "1/s:40ms",
             "--query-time-p99", "20ms", "--runs", "2", *SHORT]
    first = _run(*knobs, "--json", str(tmp_path / "a.json"))
    second = _run(*knobs, "--json", str(tmp_path / "b.json"))
    other = _run(*knobs, "--seed", "2", "--json", str(tmp_path / "c.json"))
    assert first.returncode == second.returncode == other.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert (tmp_path / "a.json").read_bytes() != (tmp_path / "c.json").read_bytes()
    document = json.loads((tmp_path / "a.json").read_text())
    assert document["source"] == "sim" and document["config"]["seed"] == 1
    assert "collapsed" in first.stdout or "held" in first.stdout


def test_out_writes_the_labs_files(tmp_path):
    """--out writes pool-drain.json and the lab's charts."""
    result = _run("sim", "pool-drain", *SHORT, "--out", str(tmp_path / "report"))
    assert result.returncode == 0, result.stderr
    names = {p.name for p in (tmp_path / "report").iterdir()}
    assert {"pool-drain.json", "pool-drain.png", "pool-drain-naive.png",
            "pool-drain-steady.png"} <= names


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["pool-drain", "--pool-size", "0"], "--pool-size must be at least 1"),
        (["pool-drain", "--latency-stalls", "often"], "is not a stall rate"),
        (["pool-drain", "--burst", "30@5s-99s"], "outside the 15 s run"),
        (["pool-drain", "--strategy", "steady-async"], "unknown strategy"),
        (["pool-drain", "--deadline", "soon"], "is not a duration"),
        (["pool-drain", "--poolers", "0"], "--poolers must be at least 1"),
        (["pool-drain", "--runs", "1000000", "--duration", "3600s"], "at most 100,000 in one"),
        (["phase-map", "--x", "colour=1:2"], "unknown phase-map knob 'colour'"),
        (["phase-map", "--x", "pool-size=40:2"], "from low to high"),
        (["phase-map", "--y", "pool-size=2:4"], "different knobs"),
        (["validate", "--quick", "--json", "/dev/null/x.json"], "is not a directory"),
    ],
)
def test_bad_knobs_get_one_line_and_exit_2(args, complaint, tmp_path):
    """Every bad knob: one line on stderr naming it, exit 2, nothing run."""
    result = _run("sim", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert complaint in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.iterdir())


def test_phase_map_writes_heatmaps_and_json(tmp_path):
    """A small phase map: one PNG per strategy and the JSON behind it, the seed's pool size
    added to the axis; naive collapses at pools 2 and 4 with 50 ms connections (the seed's
    setting), steady nowhere."""
    out = tmp_path / "map"
    result = _run("sim", "phase-map", "--x", "pool-size=2:20", "--y",
                  "connect-latency=10ms:50ms", "--steps", "2", "--runs", "2", *SHORT,
                  "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert {p.name for p in out.iterdir()} == {"phase-map.json", "phase-map-naive.png",
                                              "phase-map-steady.png"}
    document = json.loads((out / "phase-map.json").read_text())
    assert document["source"] == "sim" and document["schema_version"] == 1
    assert document["x"] == {"knob": "pool-size", "values": [2, 4, 20]}
    assert document["y"]["values"] == [0.01, 0.05]
    naive = document["collapse_probability"]["naive"]
    steady = document["collapse_probability"]["steady"]
    assert naive[1][0] == naive[1][1] == 1.0   # pools 2 and 4, 50 ms
    assert all(p == 0.0 for row in steady for p in row)
    assert "probability of collapse" in result.stdout
