"""The pool-drain lab: a shortened scenario must show the collapse and the fix."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pgsteady.errors import UsageError
from pgsteady.lab.scenarios.pool_drain import PoolDrainConfig, run_pool_drain, verdict

PGSTEADY = [sys.executable, "-m", "pgsteady"]


def test_verdicts_compare_the_last_third_with_the_first():
    """collapsed: last third < 10% of the first; recovered: back to >= 90%."""
    assert verdict([100, 100, 100, 0, 0, 0, 5, 5, 5]) == (True, False)
    assert verdict([100, 100, 100, 0, 0, 0, 95, 95, 95]) == (False, True)
    assert verdict([100, 100, 100, 50, 50, 50, 50, 50, 50]) == (False, False)
    assert verdict([0, 0, 0]) == (True, False)


@pytest.mark.parametrize(
    ("kwargs", "complaint"),
    [
        ({"pool_size": 0}, "--pool-size must be at least 1"),
        ({"duration": -1.0}, "--duration must be positive"),
        ({"burst_workers": 30, "burst_start": 5.0, "burst_end": 20.0}, "outside the 15 s run"),
        ({"stall": 0.1, "stall_at": 16.0}, "--stall at 16s lies outside"),
        ({"strategies": ("naive", "pgx")}, "unknown strategy 'pgx'"),
    ],
)
def test_bad_knobs_are_usage_errors(kwargs, complaint):
    """Impossible scenarios are refused before anything starts, naming the knob."""
    with pytest.raises(UsageError, match=complaint):
        PoolDrainConfig(**kwargs)


def test_bad_knobs_exit_2_in_one_line():
    """The CLI turns a bad knob into one line on stderr and exit code 2."""
    out = subprocess.run([*PGSTEADY, "lab", "pool-drain", "--burst", "30@5s-99s"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1
    assert "outside the 15 s run" in out.stderr


@pytest.mark.lab
@pytest.mark.slow
def test_shortened_scenario_naive_collapses_and_steady_holds(tmp_path):
    """8 s with a 2-5 s burst: naive collapses for good; steady never does, loses no server
    connection, times out (almost) nobody outside the burst and never dips far: every second
    after the first answers at least half of pgbench's rate, 80% on average (quiet runs give
    93% and 96%; the 90% bar is measured over 10 default runs by `pgsteady lab pool-drain
    --runs 10`, see the README; a collapse answers ~0%)."""
    config = PoolDrainConfig(strategies=("naive", "steady"), duration=8.0, burst_start=2.0,
                             burst_end=5.0, ceiling_duration=2.0)
    result = run_pool_drain(config)
    naive, steady = result.runs
    assert naive.strategy == "naive" and naive.collapsed and not naive.recovered
    assert naive.totals["not_ready_closures"] > 10          # the mechanism, seen in the log
    assert naive.totals["server_connections_opened"] > 10  # refills, one at a time
    assert steady.strategy == "steady" and not steady.collapsed
    assert steady.totals["not_ready_closures"] == 0
    assert steady.totals["server_connections_opened"] == 0
    outside_burst = [r for r in steady.per_second if r["t"] < 2 or r["t"] >= 5]
    # 0 on a quiet machine; on one that other labs load to 5x its cores, a thread can miss a
    # 50 ms deadline by scheduling alone (main's code too: 7-202 per run at load 9-12). The
    # mechanism is asserted exactly above; a collapse would time out nearly every call.
    assert sum(r["timeouts"] for r in outside_burst) \
        <= 0.1 * sum(r["answered"] for r in outside_burst)
    # Bars a machine shared with other labs can hold: the ceiling is measured once, before
    # the runs, and a load spike in one second cost 33% at load 8 (80%/90% failed there).
    for row in steady.per_second[1:]:
        assert row["answered"] >= 0.5 * result.pgbench_tps, row
    after_first = [row["answered"] for row in steady.per_second[1:]]
    assert sum(after_first) / len(after_first) >= 0.8 * result.pgbench_tps
    # What the database finished agrees with what callers were told, within the seconds'
    # edges: steady's answers all ran on the server.
    assert abs(steady.totals["db_completions"] - steady.totals["answered"]) \
        <= 0.02 * steady.totals["answered"] + 20
    document = result.to_json()
    assert document["schema_version"] == 1 and document["scenario"] == "pool-drain"
    assert document["source"] == "lab"
    assert set(document["runs"][0]["per_second"][0]) == {
        "t", "answered", "timeouts", "rejected", "db_completions",
        "server_connections_opened", "not_ready_closures", "cl_waiting", "sv_active",
        "sv_login"}
    json.dumps(document)  # serialisable as is
