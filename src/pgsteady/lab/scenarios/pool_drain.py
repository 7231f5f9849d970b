"""The pool-drain scenario (docs/outages.md): short deadlines through PgBouncer, a burst, and what
each client strategy does to the pool — measured on the server, not in client bookkeeping.

One PostgreSQL serves every run; each run gets a fresh PgBouncer and fault proxy (a collapsed
PgBouncer holds thousands of queued clients), pre-filled to ``min_pool_size`` before the
clock starts. The query is ``SELECT nextval('done') FROM pg_sleep(query_time)``: the sequence
moves only when a query has finished on the server, which is what ``db_completions`` counts.
The ceiling is pgbench running the same query over the same PgBouncer + proxy path.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import psycopg

from pgsteady import _verdicts
from pgsteady._docs import POOL_DRAIN
from pgsteady._version import __version__
from pgsteady.errors import LabError, UsageError
from pgsteady.lab import _process
from pgsteady.lab.cluster import Cluster, Postgres, make_workdir
from pgsteady.lab.knobs import ClusterKnobs, knob
from pgsteady.lab.load import STRATEGIES, Driver, Series, Shift, Target
from pgsteady.lab.scenarios.registry import Scenario

log = logging.getLogger("pgsteady.lab")

SCHEMA_VERSION = 1
DBNAME = "lab"
COUNTERS = ("answered", "timeouts", "rejected", "db_completions", "server_connections_opened",
            "not_ready_closures")
SAMPLE_EVERY = 0.2
# steady's client pool is PgBouncer's pool_size plus this many connections: the smallest
# overcommit that keeps every server connection busy while a worker turns one result into its
# next query (bench/pool_drain_ceiling.py, quiet 2-core machine, 3 runs each: worst second /
# mean of pgbench's rate 94/97 % at 0, 97-99/99-100 % at 1, 97-98/100 % at 2).
DEFAULT_OVERCOMMIT = 1
COLLAPSED_BELOW = 0.10   # last third < 10% of the first third's answers per second
RECOVERED_ABOVE = 0.90   # last third back to >= 90% of the first third


@dataclass(frozen=True)
class PoolDrainKnobs:
    """The pool-drain setting the lab, the model and both commands share: names, defaults
    (the outage's values), units and help, here once (:mod:`pgsteady.lab.knobs`)."""

    STRATEGY_CHOICES: ClassVar[tuple[str, ...]] = STRATEGIES

    strategies: tuple[str, ...] = knob(("naive", "steady"), "strategies",
                                       "comma-separated", option="--strategy")
    pool_size: int = knob(4, "count", "PgBouncer's default_pool_size: server connections "
                          "per pool")
    min_pool_size: int | None = knob(None, "count", "server connections PgBouncer keeps "
                                     "open (default: the pool size)")
    connect_latency: float = knob(0.050, "duration", "cost of each new server connection, "
                                  "added by the lab's proxy")
    query_time: float = knob(0.005, "duration", "how long each query runs on the server; in "
                             "the model, the median with --query-time-p99")
    deadline: float = knob(0.050, "duration", "how long each caller waits for its answer")
    workers: int = knob(10, "count", "closed-loop workers running the whole time; in the "
                        "model, over all its poolers")
    burst_workers: int = knob(30, "burst", "extra workers and when: workers@start-end, 0 "
                              "for none", option="--burst",
                              parts=("burst_workers", "burst_start", "burst_end"))
    burst_start: float = 5.0
    burst_end: float = 10.0
    duration: float = knob(15.0, "duration", "length of each strategy's run")
    runs: int = knob(1, "count", "runs per strategy")
    stall: float = knob(0.0, "stall", "hold all traffic between PgBouncer and PostgreSQL "
                        "once: 100ms@7s", parts=("stall", "stall_at"))
    stall_at: float = 0.0
    cancel_delay: float = knob(0.1, "duration", "the cancel strategy's extra wait before it "
                               "closes")
    overcommit: int = knob(DEFAULT_OVERCOMMIT, "count", "steady's client connections beyond "
                           "PgBouncer's pool size; 1 keeps every server connection busy")

    @property
    def min_pool(self) -> int:
        """The server connections kept open: ``min_pool_size``, else the pool size."""
        return self.pool_size if self.min_pool_size is None else self.min_pool_size


@dataclass(frozen=True)
class PoolDrainConfig(ClusterKnobs, PoolDrainKnobs):
    """The outage's values are the defaults; ``min_pool_size`` None becomes the pool size
    (0 with ``cold_start``)."""

    ceiling_duration: float = knob(5.0, "duration", "how long pgbench runs for the ceiling")
    cold_start: bool = knob(False, "flag", "PgBouncer's pool is empty when the load starts "
                            "(min_pool_size 0, no warm-up query) and, unless --burst is given, "
                            "there is no burst: the outage's cold-start collapse at the steady "
                            "load")
    # Also measure pgbench on each run's own cluster just before it: the machine's speed drifts
    # by a few % over minutes, and a run is then compared with the path it ran on.
    ceiling_each_run: bool = knob(False, "flag", "also run pgbench on each run's own cluster "
                                  "just before it and compare the run with that (the "
                                  "machine's speed drifts by a few % over minutes); not with "
                                  "--cold-start")

    def __post_init__(self) -> None:
        if self.min_pool_size is None:
            object.__setattr__(self, "min_pool_size", 0 if self.cold_start else self.pool_size)
        problems = []
        if not self.strategies:
            problems.append("at least one --strategy is needed")
        problems += [f"unknown strategy {s!r}; choose from {', '.join(STRATEGIES)}"
                     for s in self.strategies if s not in STRATEGIES]
        if self.pool_size < 1:
            problems.append(f"--pool-size must be at least 1, got {self.pool_size}")
        if not 0 <= self.min_pool <= self.pool_size:
            problems.append("min_pool_size must be between 0 and --pool-size")
        if self.query_time <= 0 or self.deadline <= 0:
            problems.append("--query-time and --deadline must be positive durations")
        if self.duration <= 0:
            problems.append(f"--duration must be positive, got {self.duration}")
        if self.workers < 1 or self.runs < 1:
            problems.append("--workers and --runs must be at least 1")
        if self.burst_workers and not (0 <= self.burst_start < self.burst_end
                                       <= self.duration):
            problems.append(f"--burst {self.burst_workers}@{self.burst_start:g}s-"
                            f"{self.burst_end:g}s lies outside the {self.duration:g} s run")
        if self.stall and not 0 <= self.stall_at < self.duration:
            problems.append(f"--stall at {self.stall_at:g}s lies outside the "
                            f"{self.duration:g} s run")
        if self.overcommit < 0:
            problems.append(f"--overcommit must be 0 or more, got {self.overcommit}")
        if self.ceiling_each_run and self.cold_start:
            problems.append("--ceiling-each-run measures pgbench before each run, which would "
                            "warm PgBouncer's pool: use one or the other")
        if self.cold_start and self.min_pool_size:
            problems.append("--cold-start starts PgBouncer with no server connection; "
                            "drop --min-pool-size")
        if min(self.connect_latency, self.stall, self.cancel_delay) < 0:
            problems.append("durations must not be negative")
        if problems:
            raise UsageError("; ".join(problems))

    @property
    def query(self) -> str:
        return f"SELECT nextval('done') FROM pg_sleep({self.query_time:.6f})"

    def shifts(self) -> list[Shift]:
        shifts = [Shift(self.workers, 0.0, self.duration)]
        if self.burst_workers:
            shifts.append(Shift(self.burst_workers, self.burst_start, self.burst_end))
        return shifts


@dataclass
class RunResult:
    strategy: str
    run: int
    collapsed: bool
    recovered: bool
    per_second: list[dict[str, Any]]
    totals: dict[str, Any]
    # Not part of the JSON schema: shown in the tables.
    dropped_cancels: int = 0
    errors: int = 0
    driver_cpu_seconds: float = 0.0
    # With ``ceiling_each_run``: pgbench's rate on this run's own cluster, just before it.
    ceiling_tps: float | None = None

    @property
    def verdict(self) -> str:
        """The run in one word (:mod:`pgsteady._verdicts`): what every view of it says."""
        timeouts = sum(int(r.get("timeouts") or 0) for r in self.per_second)
        return _verdicts.pool_drain(self.collapsed, self.recovered, timeouts).word

    def to_json(self) -> dict[str, Any]:
        doc = {"strategy": self.strategy, "run": self.run, "verdict": self.verdict,
               "collapsed": self.collapsed, "recovered": self.recovered,
               "per_second": self.per_second, "totals": self.totals}
        if self.ceiling_tps is not None:
            doc["ceiling"] = {"pgbench_tps": round(self.ceiling_tps, 1)}
        return doc


@dataclass
class PoolDrainResult:
    config: PoolDrainConfig
    pgbench_tps: float
    runs: list[RunResult]
    versions: dict[str, str]
    # "lab" (measured) or "sim" (the model, pgsteady.sim), whose own knobs go in extra_config.
    source: str = "lab"
    extra_config: dict[str, Any] = field(default_factory=dict)
    # Not part of the JSON: with ``hold_sample``, each query's latency in pgbench with one
    # client per server connection (no queue), in seconds: how long the path holds a server
    # connection per query, tail included (what pgsteady.sim.validate calibrates from).
    hold_times: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "scenario": "pool-drain",
            "source": self.source,
            "config": {**asdict(self.config), "strategies": list(self.config.strategies),
                       **self.extra_config, "versions": self.versions},
            "ceiling": {"pgbench_tps": round(self.pgbench_tps, 1)},
            "machine": {"cores": os.cpu_count()},
            "runs": [run.to_json() for run in self.runs],
        }


Progress = Callable[[str, float], None]


def run_pool_drain(config: PoolDrainConfig, progress: Progress | None = None,
                   base_dir: str | None = None, *, hold_sample: bool = False) -> PoolDrainResult:
    """Run the ceiling and every strategy x run; always tear everything down. With
    ``hold_sample``, also time each query of a pgbench run with one client per server
    connection (:attr:`PoolDrainResult.hold_times`)."""
    report = progress or (lambda label, seconds: None)
    who = _process.run_as()
    workdir = make_workdir(base_dir, who)
    server = Postgres(workdir, who=who, durable=config.durable, pg_version=config.pg_version)
    try:
        server.start()
        _prepare_database(server)
        versions = {"postgresql": server.version(),
                    "pgbouncer": server.binaries.pgbouncer_version(), "pgsteady": __version__}
        report("pgbench ceiling", 0)
        tps, _ = _ceiling(server, config)
        holds = _ceiling(server, config, clients=config.pool_size)[1] if hold_sample else []
        report("pgbench ceiling", config.ceiling_duration)
        runs = [
            _one_run(server, config, strategy, index, report)
            for strategy in config.strategies for index in range(1, config.runs + 1)
        ]
        return PoolDrainResult(config, tps, runs, versions, hold_times=holds)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _prepare(given: dict[str, Any]) -> dict[str, Any]:
    """--cold-start with no --burst means no burst: the seed's collapse at the steady load."""
    if given.get("cold_start") and "burst_workers" not in given:
        return {**given, "burst_workers": 0, "burst_start": 0.0, "burst_end": 0.0}
    return given


SCENARIO = Scenario(
    name="pool-drain",
    help="reproduce the PgBouncer pool drain and show the fix side by side",
    description=f"Reproduce the pool-drain outage ({POOL_DRAIN}): short deadlines through "
                "PgBouncer with a 50 ms connection cost and a burst. Runs pgbench for the "
                "ceiling, then each strategy, and prints per-second tables and a summary.",
    config=PoolDrainConfig, run=run_pool_drain,
    report="pgsteady.lab.scenarios.pool_drain_report",
    seconds=lambda c: c.ceiling_duration + len(c.strategies) * c.runs * c.duration,
    prepare=_prepare)


def _prepare_database(server: Postgres) -> None:
    server.create_database(DBNAME)
    with psycopg.connect(server.dsn(DBNAME), autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE done")


def _cluster(server: Postgres, config: PoolDrainConfig) -> Cluster:
    return Cluster(postgres=server, pool_size=config.pool_size,
                   min_pool_size=config.min_pool, connect_delay=config.connect_latency,
                   proxy=True, proxy_process=True, max_client_conn=10000,
                   base_dir=server.workdir)


def _warm(cluster: Cluster, config: PoolDrainConfig, *, cold: bool = False) -> None:
    """Make PgBouncer open its min_pool_size connections before the clock starts.

    ``cold``: the run starts with no server connection at all, as after PgBouncer closed its
    idle ones (``server_idle_timeout``) or the database restarted under it. One login first,
    so that PgBouncer has the parameters it greets clients with; without it, the first
    client's login would itself open a server connection and the start would not be cold."""
    with psycopg.connect(cluster.pooled_dsn(DBNAME), prepare_threshold=None,
                         autocommit=True) as conn:
        if not cold:
            conn.execute("select 1")
            if config.min_pool:  # PgBouncer fills min_pool_size while a client is in
                cluster.wait_pool_filled(DBNAME, config.min_pool, timeout=30)
    if cold:
        cluster.drop_server_connections(DBNAME, timeout=30)


_TPS = re.compile(r"tps = ([0-9.]+) \(without initial connection time\)")


def _ceiling(server: Postgres, config: PoolDrainConfig,
             clients: int | None = None) -> tuple[float, list[float]]:
    """pgbench's throughput over the same PgBouncer + proxy path with the same query
    (``config.workers`` clients), on a cluster of its own; see :func:`_pgbench`."""
    with _cluster(server, config) as cluster:
        _warm(cluster, config)
        return _pgbench(server, cluster, config, clients)


def _pgbench(server: Postgres, cluster: Cluster, config: PoolDrainConfig,
             clients: int | None = None) -> tuple[float, list[float]]:
    """pgbench's throughput through ``cluster``'s PgBouncer for ``config.ceiling_duration``;
    with ``clients``, that many, and each query's latency from pgbench's per-transaction log
    (seconds, at most 100,000)."""
    pgbench = server.binaries.pg_bindir / "pgbench"
    if not pgbench.exists():  # the server-only builds of other majors: any pgbench will do
        pgbench = _process.find_binaries().pg_bindir / "pgbench"
    if not pgbench.exists():
        raise LabError(f"pgbench not found in {server.binaries.pg_bindir}; install the "
                       f"postgresql package (it ships pgbench)")
    with tempfile.TemporaryDirectory(prefix="pgsteady-pgbench-") as scratch:
        script = os.path.join(scratch, "query.sql")
        with open(script, "w") as f:
            f.write(config.query + ";\n")
        log_args = ["-l", "--log-prefix", os.path.join(scratch, "tx")] if clients else []
        out = subprocess.run(
            [str(pgbench), "-n", "-f", script, "-c", str(clients or config.workers),
             "-j", "2", *log_args, "-T", str(max(1, round(config.ceiling_duration))),
             cluster.pooled_dsn(DBNAME)],
            capture_output=True, text=True, timeout=config.ceiling_duration + 60, check=False,
            cwd=scratch)
        latencies = _pgbench_latencies(scratch) if clients else []
    m = _TPS.search(out.stdout)
    if out.returncode != 0 or not m:
        raise LabError(f"pgbench failed (exit {out.returncode}): "
                       f"{(out.stderr or out.stdout).strip().splitlines()[-1:]}")
    return float(m[1]), latencies


def _pgbench_latencies(directory: str, limit: int = 100_000) -> list[float]:
    """The latency column (microseconds, the third) of pgbench's per-transaction logs."""
    latencies: list[float] = []
    for name in sorted(os.listdir(directory)):
        if not name.startswith("tx"):
            continue
        with open(os.path.join(directory, name)) as log_file:
            for line in log_file:
                parts = line.split()
                if len(parts) >= 3 and parts[2].isdigit() and len(latencies) < limit:
                    latencies.append(int(parts[2]) / 1e6)
    return latencies


class _Sampler(threading.Thread):
    """Every 200 ms, aligned to the run's clock: SHOW POOLS and the completion sequence."""

    def __init__(self, cluster: Cluster, server: Postgres, t0: float, until: float) -> None:
        super().__init__(name="pgsteady-lab-sampler", daemon=True)
        self.cluster, self.server, self.t0, self.until = cluster, server, t0, until
        self.pools: list[tuple[float, dict[str, Any]]] = []
        self.sequence: list[tuple[float, int]] = []
        self.stopping = threading.Event()  # the run ended early: stop before the servers do

    def run(self) -> None:
        try:
            self._sample()
        except psycopg.Error as exc:  # PgBouncer went away: the run reports it
            log.warning("sampling stopped: %s", str(exc).strip().splitlines()[0])

    def _sample(self) -> None:
        assert self.cluster.pgbouncer is not None
        with psycopg.connect(self.server.dsn(DBNAME), autocommit=True) as db, \
                psycopg.connect(self.cluster.admin_dsn, autocommit=True) as admin:
            show = psycopg.ClientCursor(admin, row_factory=psycopg.rows.dict_row)
            tick = 0
            while True:
                at = self.t0 + tick * SAMPLE_EVERY
                if at > self.until or self.stopping.wait(max(0.0, at - time.monotonic())):
                    return
                row = db.execute("SELECT last_value FROM done").fetchone()
                self.sequence.append((time.monotonic() - self.t0, row[0] if row else 0))
                show.execute("SHOW POOLS")
                for pool in show.fetchall():
                    if pool["database"] == DBNAME:
                        self.pools.append((time.monotonic() - self.t0, pool))
                tick += 1


def _one_run(server: Postgres, config: PoolDrainConfig, strategy: str, index: int,
             report: Progress) -> RunResult:
    label = f"{strategy} run {index}"
    with _cluster(server, config) as cluster:
        assert cluster.pgbouncer is not None and cluster.proxy is not None
        _warm(cluster, config, cold=config.cold_start)
        ceiling = _pgbench(server, cluster, config)[0] if config.ceiling_each_run else None
        reader = cluster.pgbouncer.log_reader()
        target = Target("127.0.0.1", cluster.pgbouncer.port, DBNAME, "postgres", config.query,
                        config.deadline, config.pool_size, config.cancel_delay,
                        passfile=str(cluster.pgbouncer.passfile),
                        overcommit=config.overcommit)
        cpu0 = time.process_time()
        t0 = time.monotonic() + 0.3  # leave the sampler time to connect
        epoch0 = time.time() + (t0 - time.monotonic())
        sampler = _Sampler(cluster, server, t0, t0 + config.duration)
        sampler.start()
        gc.collect()
        gc.freeze()  # the driver's long-lived objects stay out of collections during the run
        try:
            series = asyncio.run(_drive(strategy, target, t0, config=config, cluster=cluster,
                                        report=report, label=label))
        except BaseException:  # Ctrl-C: the sampler stops before the servers it reads do
            sampler.stopping.set()
            sampler.join(5)
            raise
        finally:
            gc.unfreeze()
        sampler.join(config.duration + 30)
        cpu = time.process_time() - cpu0
        time.sleep(0.3)  # PgBouncer's last log lines
        log_counts = reader.counts(start_epoch=epoch0)
        if not cluster.pgbouncer.running:
            log.warning("PgBouncer exited during the %s run: %s", label,
                        _process.tail(cluster.pgbouncer.log_path, 1))
        opened: defaultdict[int, int] = defaultdict(int)
        for at, kind in cluster.proxy.events():
            if kind == "startup" and 0 <= at - t0 < config.duration:
                opened[int(at - t0)] += 1
    result = _summarise(config, strategy, index, series=series, sampler=sampler,
                        log_per_second=log_counts.per_second, opened=opened, cpu=cpu)
    result.ceiling_tps = ceiling
    return result


async def _drive(strategy: str, target: Target, t0: float, *, config: PoolDrainConfig,
                 cluster: Cluster, report: Progress, label: str) -> Series:
    loop = asyncio.get_running_loop()
    driver = Driver(strategy, target, t0)
    assert cluster.proxy is not None
    proxy = cluster.proxy
    if config.stall:
        loop.call_at(loop.time() + (t0 - time.monotonic()) + config.stall_at,
                     lambda: loop.run_in_executor(None, proxy.stall, config.stall))
    ticker = asyncio.create_task(_tick(report, label, t0, config.duration))
    try:
        return await driver.run(config.shifts())
    finally:
        ticker.cancel()


async def _tick(report: Progress, label: str, t0: float, duration: float) -> None:
    second = 0
    while second < duration:
        await asyncio.sleep(max(0.0, t0 + second + 1 - time.monotonic()))
        second += 1
        report(label, 1.0)


def _summarise(config: PoolDrainConfig, strategy: str, index: int, *, series: Series,
               sampler: _Sampler, log_per_second: dict[int, Any], opened: dict[int, int],
               cpu: float) -> RunResult:
    seconds = max(1, round(config.duration))
    completions = _per_second_deltas(sampler.sequence, seconds)
    rows: list[dict[str, Any]] = []
    for t in range(seconds):
        pools = [p for at, p in sampler.pools if t <= at < t + 1]
        rows.append({
            "t": t,
            "answered": series.answered[t],
            "timeouts": series.timeouts[t],
            "rejected": series.rejected[t],
            "db_completions": completions[t],
            "server_connections_opened": opened.get(t, 0),
            "not_ready_closures": log_per_second.get(t, {}).get("not_ready", 0),
            "cl_waiting": max((p["cl_waiting"] for p in pools), default=0),
            "sv_active": _mean([p["sv_active"] for p in pools]),
            "sv_login": _mean([p["sv_login"] for p in pools]),
        })
    totals: dict[str, Any] = {key: sum(r[key] for r in rows) for key in COUNTERS}
    totals["cl_waiting"] = max((r["cl_waiting"] for r in rows), default=0)  # the peak
    totals["sv_active"] = _mean([r["sv_active"] for r in rows])              # the mean
    totals["sv_login"] = _mean([r["sv_login"] for r in rows])
    collapsed, recovered = verdict([r["answered"] for r in rows])
    return RunResult(
        strategy, index, collapsed, recovered, rows, totals,
        dropped_cancels=sum(c.get("cancel_idle", 0) for c in log_per_second.values()),
        errors=sum(series.errors.values()), driver_cpu_seconds=round(cpu, 2),
    )


def verdict(answered: list[int]) -> tuple[bool, bool]:
    """(collapsed, recovered) from answers per second: the last third against the first."""
    third = max(1, len(answered) // 3)
    first = sum(answered[:third]) / third
    last = sum(answered[-third:]) / third
    if first <= 0:
        return (True, False)
    return (last < COLLAPSED_BELOW * first, last >= RECOVERED_ABOVE * first)


def _per_second_deltas(samples: list[tuple[float, int]], seconds: int) -> list[int]:
    """Completions in each second from (time, sequence value) samples on a 200 ms grid."""
    def value_at(t: float) -> int:
        before = [v for at, v in samples if at <= t + SAMPLE_EVERY / 2]
        return before[-1] if before else (samples[0][1] if samples else 0)

    return [max(0, value_at(t + 1) - value_at(t)) for t in range(seconds)]


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0
