"""The pool-drain lab: a shortened scenario must show the collapse and the fix."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest

from pgsteady.errors import UsageError
from pgsteady.lab.scenarios.pool_drain import PoolDrainConfig, run_pool_drain, verdict
from pgsteady.lab.scenarios.pool_drain_report import ceiling_share, summary_table

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
        ({"ceiling_each_run": True, "cold_start": True, "min_pool_size": 0},
         "--ceiling-each-run measures pgbench before each run"),
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
    """8 s with a 2-5 s burst: naive collapses for good; steady (its client pool overcommitting
    PgBouncer's by 1) never does and loses no server connection. What is asserted does not
    depend on the host's speed: the mechanism's counts exactly, and against a collapse (which
    answers nothing and times out nearly everyone) bounds with wide margins: at most a stray
    1 % of timeouts outside the burst, every second after the first at least half of pgbench's
    rate, 80 % on average. The 95 %/97 % bars are measured over 10 default runs by
    `bench/pool_drain_ceiling.py` (see docs/lab.md)."""
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
    assert sum(r["timeouts"] for r in outside_burst) \
        <= 0.01 * sum(r["answered"] for r in outside_burst)
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


@pytest.mark.lab
@pytest.mark.slow
def test_cold_start_naive_collapses_and_steady_waits_for_the_first_connections():
    """PgBouncer starts with no server connection; 10 workers from the first second, no burst.
    naive's first queries wait for brand-new connections longer than their deadline, so each
    new connection goes to a client that has left and is destroyed: it collapses at once and
    never answers. steady and steady-async wait for the first connections instead, then hold."""
    config = PoolDrainConfig(strategies=("naive", "steady", "steady-async"), duration=6.0,
                             burst_workers=0, min_pool_size=0, cold_start=True,
                             ceiling_duration=1.0)
    result = run_pool_drain(config)
    naive, *steadies = result.runs
    assert naive.strategy == "naive" and naive.collapsed and not naive.recovered
    assert naive.totals["not_ready_closures"] > 10
    assert sum(r["answered"] for r in naive.per_second[1:]) \
        < 0.1 * result.pgbench_tps * (len(naive.per_second) - 1)
    for run in steadies:
        assert not run.collapsed, run.strategy
        assert run.totals["not_ready_closures"] == 0, run.strategy
        # PgBouncer opens its pool once, one connection at a time, and keeps it.
        assert 1 <= run.totals["server_connections_opened"] <= config.pool_size, run.strategy
        # Callers miss deadlines while the first connections open; afterwards at most a
        # stray few (a busy 2-core machine), never a spiral.
        later = run.per_second[1:]
        assert sum(r["timeouts"] for r in later) <= 0.01 * sum(r["answered"] for r in later)
        assert run.per_second[-1]["answered"] > 0.5 * result.pgbench_tps, run.strategy
    assert result.to_json()["config"]["cold_start"] is True


@pytest.mark.lab
@pytest.mark.slow
def test_ceiling_each_run_measures_pgbench_on_the_runs_own_cluster():
    """With ceiling_each_run, each run carries pgbench's rate on its own cluster (the same
    path, so near the ceiling measured first), the summary compares the run with it, and the
    JSON keeps it beside the run."""
    config = PoolDrainConfig(strategies=("steady",), duration=4.0, burst_workers=0,
                             ceiling_duration=1.0, ceiling_each_run=True)
    result = run_pool_drain(config)
    (run,) = result.runs
    assert run.ceiling_tps is not None
    assert 0.7 * result.pgbench_tps <= run.ceiling_tps <= 1.3 * result.pgbench_tps
    worst, mean = ceiling_share(run, run.ceiling_tps)
    assert mean >= 0.8 and worst > 0
    assert result.to_json()["runs"][0]["ceiling"]["pgbench_tps"] == round(run.ceiling_tps, 1)
    assert "each run's own cluster" in dict(summary_table(result).legend())["ceiling"]


def test_a_cold_pool_has_no_server_connection_but_greets_clients_at_once(pgsteady_stack,
                                                                         pgsteady_database):
    """drop_server_connections leaves PgBouncer with none, and a new client logs in without
    opening one (PgBouncer remembers its greeting), so the first query meets an empty pool."""
    cluster, name = pgsteady_stack(pool_size=2), pgsteady_database.name
    with psycopg.connect(cluster.pooled_dsn(name), autocommit=True) as conn:
        conn.execute("select 1")
    assert cluster.server_connections(name) >= 1
    assert cluster.drop_server_connections(name) >= 1
    assert cluster.server_connections(name) == 0
    with psycopg.connect(cluster.pooled_dsn(name), autocommit=True):
        assert cluster.server_connections(name) == 0


def test_cold_start_refuses_a_min_pool_size():
    """--cold-start with PgBouncer told to keep connections open is a contradiction: exit 2."""
    with pytest.raises(UsageError, match="--cold-start starts PgBouncer with no server"):
        PoolDrainConfig(cold_start=True, min_pool_size=4)
    out = subprocess.run([*PGSTEADY, "lab", "pool-drain", "--cold-start", "--min-pool-size", "2"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2 and "drop --min-pool-size" in out.stderr


@pytest.mark.lab
@pytest.mark.slow
def test_sqlalchemy_collapses_under_a_burst_and_sqlalchemy_steady_destroys_nothing():
    """A plain AsyncEngine with asyncio.timeout closes connections PgBouncer had linked (not-
    ready closures, one per caller that left mid-query) and collapses; AsyncSteady over the
    same engine kind never closes one: no not-ready closure, no server connection opened."""
    config = PoolDrainConfig(strategies=("sqlalchemy", "sqlalchemy-steady"), duration=8.0,
                             burst_start=2.0, burst_end=5.0, ceiling_duration=1.0)
    result = run_pool_drain(config)
    plain, steady = result.runs
    assert plain.strategy == "sqlalchemy" and plain.collapsed
    assert plain.totals["not_ready_closures"] > 10
    assert steady.strategy == "sqlalchemy-steady" and not steady.collapsed
    assert steady.totals["not_ready_closures"] == 0
    assert steady.totals["server_connections_opened"] == 0
    assert steady.per_second[-1]["db_completions"] > 0
    assert [run["strategy"] for run in result.to_json()["runs"]] == \
        ["sqlalchemy", "sqlalchemy-steady"]
