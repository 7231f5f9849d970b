"""The lock-queue scenario (seed 002): a long log query, a deploy whose migration queues behind
it, health checks that restart servers, restarted servers that leak sessions — and the same
deploy, on the same load, under pgsteady.

One PostgreSQL (``max_connections`` scaled down, a few slots reserved for superusers) serves
every run; each run gets a fresh copy of a template database (``orgs`` and ``request_log``), its
own gateway replicas (real uvicorn processes under :mod:`pgsteady.lab.supervisor`) and an
open-loop load (:mod:`pgsteady.lab.traffic`). What is measured comes from the database (a
superuser session opened before the clock starts, so it never needs a free slot) and from the
load generator; the apps' own bookkeeping is not used. The run's database is dropped with
``FORCE`` afterwards, which also ends whatever sessions a run left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import psycopg
from psycopg import sql

from pgsteady import _majors, _verdicts
from pgsteady._docs import LOCK_QUEUE
from pgsteady.errors import LabError, MigrationError, PgsteadyError, UsageError
from pgsteady.lab import _auth, _process
from pgsteady.lab.cluster import Postgres, make_workdir
from pgsteady.lab.gateway import MIGRATION, GatewayConfig
from pgsteady.lab.knobs import ClusterKnobs, knob
from pgsteady.lab.scenarios import _lock_queue_sql as q
from pgsteady.lab.scenarios._lock_queue_sampler import Sampler
from pgsteady.lab.scenarios.registry import Scenario
from pgsteady.lab.supervisor import Supervisor, new_version
from pgsteady.lab.traffic import CLASSES, LoadGenerator, Mix, Outcomes, get, p99

log = logging.getLogger("pgsteady.lab")

SCHEMA_VERSION = 1
STRATEGIES = ("naive", "steady")
GATEWAY_ROLE = "gateway"
TEMPLATE = "lq_template"
OUTAGE_BELOW = 0.5      # uncached lookups answered below this share ...
OUTAGE_SECONDS = 10     # ... for this many seconds in a row: an outage


MAX_REPLICAS = 16


@dataclass(frozen=True)
class LockQueueConfig(ClusterKnobs):
    """The seed's chain scaled from hours to seconds; every value is a knob."""

    STRATEGY_CHOICES: ClassVar[tuple[str, ...]] = STRATEGIES

    strategies: tuple[str, ...] = knob(STRATEGIES, "strategies", "comma-separated",
                                       option="--strategy")
    replicas: int = knob(3, "count", "gateway replicas, each a uvicorn process with its own "
                         "pool")
    rate: int = knob(200, "count", "requests a second over all endpoints")
    cached_share: float = knob(0.6, "share", "share of lookups for organizations in the "
                               "replicas' cache")
    dashboard_share: float = knob(0.05, "share", "share of requests for the dashboard's log "
                                  "page")
    duration: float = knob(60.0, "duration", "how long each run lasts")
    deploy_at: float = knob(8.0, "duration", "when the new version is deployed")
    # Seed 002 had several dashboard log queries open for hours; two here, so that under
    # steady (which stops each after 5 s) one still holds orgs when the deploy comes.
    long_query_at: tuple[float, ...] = knob((2.0, 6.0), "times", "when dashboard users open "
                                            "the slow log page")
    long_query_for: float = knob(40.0, "duration", "how long the slow log query would run")
    probe_interval: float = knob(1.0, "duration", "how often the supervisor probes each "
                                 "replica")
    probe_failures: int = knob(3, "count", "failed probes in a row before a restart or "
                               "leaving rotation")
    max_connections: int = knob(60, "count", "PostgreSQL's max_connections, 3 of them "
                                "reserved")
    reserved_connections: int = 3
    pool_size: int = 10
    client_timeout: float = 10.0
    lock_timeout: float = knob(1.0, "duration", "steady: the migration's lock_timeout cap")
    log_statement_timeout: float = knob(5.0, "duration", "steady: statement_timeout of the "
                                        "bounded log query")
    orgs: int = 20_000
    log_rows: int = 200_000
    hot_keys: int = 100
    runs: int = knob(1, "count", "runs of each strategy")

    def __post_init__(self) -> None:
        problems = []
        problems += [f"unknown strategy {s!r}; choose from {', '.join(STRATEGIES)}"
                     for s in self.strategies if s not in STRATEGIES]
        if not self.strategies:
            problems.append("at least one --strategy is needed")
        if not 1 <= self.replicas <= MAX_REPLICAS:
            problems.append(f"--replicas must be between 1 and {MAX_REPLICAS} (each is a real "
                            f"process with its own pool), got {self.replicas}")
        if self.rate < 1:
            problems.append(f"--rate must be at least 1 request a second, got {self.rate}")
        if self.duration <= 0:
            problems.append(f"--duration must be positive, got {self.duration:g}")
        elif not 0 <= self.deploy_at < self.duration:
            problems.append(f"--deploy-at {self.deploy_at:g}s lies outside the "
                            f"{self.duration:g} s run; deploy before the end")
        problems += [f"--long-query-at {at:g}s lies outside the {self.duration:g} s run"
                     for at in self.long_query_at if not 0 <= at < self.duration]
        if not 0 <= self.cached_share + self.dashboard_share <= 1 or \
                min(self.cached_share, self.dashboard_share) < 0:
            problems.append("--cached-share and --dashboard-share must be between 0 and 1 "
                            "and add up to at most 1")
        if self.probe_interval <= 0 or self.probe_failures < 1:
            problems.append("--probe-interval must be positive and --probe-failures >= 1")
        if self.max_connections < self.reserved_connections + 5:
            problems.append(f"--max-connections must leave room for the apps: at least "
                            f"{self.reserved_connections + 5}")
        durations = {"--long-query-for": self.long_query_for,
                     "--lock-timeout": self.lock_timeout,
                     "--log-statement-timeout": self.log_statement_timeout,
                     "client_timeout": self.client_timeout}  # no option: given in Python
        problems += [f"{flag} must be positive, got {value:g}s"
                     for flag, value in durations.items() if value <= 0]
        if self.pool_size < 1 or self.runs < 1 or self.hot_keys < 1:
            problems.append("--pool-size, --runs and the hot keys must be at least 1")
        if self.pg_version is not None and "steady" in self.strategies and \
                not _majors.supports(self.pg_version,
                                     _majors.CLIENT_CONNECTION_CHECK_INTERVAL):
            problems.append(f"steady drops dead clients' sessions with "
                            f"client_connection_check_interval, which PostgreSQL 14 added; on "
                            f"{self.pg_version} run --strategy naive")
        if self.orgs < self.hot_keys + 100:
            problems.append(f"--orgs must exceed the hot keys by 100 or more, got {self.orgs}")
        if problems:
            raise UsageError("; ".join(problems))


@dataclass
class Migration:
    """What the deploy's migration did, from the database and the deploy step."""

    applied: bool = False
    applied_at_s: float | None = None
    tries: int = 0
    blocker_named: bool = False
    error: str = ""


@dataclass
class RunResult:
    strategy: str
    run: int
    verdict: str
    connections_exhausted: bool
    restarts: int
    migration: Migration
    per_second: list[dict[str, Any]]
    totals: dict[str, Any]
    long_queries: list[tuple[float, float]] = field(default_factory=list)
    restart_times: list[float] = field(default_factory=list)
    # Not part of the JSON schema: for checks that every replica process is gone.
    pids: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "run": self.run, "verdict": self.verdict,
                "connections_exhausted": self.connections_exhausted,
                "restarts": self.restarts, "migration": asdict(self.migration),
                "per_second": self.per_second, "totals": self.totals,
                "long_queries": [list(span) for span in self.long_queries],
                "restart_times": self.restart_times}


@dataclass
class LockQueueResult:
    config: LockQueueConfig
    runs: list[RunResult]
    versions: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "scenario": "lock-queue",
                "config": {**asdict(self.config), "strategies": list(self.config.strategies),
                           "long_query_at": list(self.config.long_query_at),
                           "versions": self.versions},
                "runs": [run.to_json() for run in self.runs]}


Progress = Callable[[str, float], None]


def run_lock_queue(config: LockQueueConfig, progress: Progress | None = None,
                   base_dir: str | None = None) -> LockQueueResult:
    """Every strategy x run on one PostgreSQL; everything started is stopped on every exit."""
    report = progress or (lambda label, seconds: None)
    who = _process.run_as()
    workdir = make_workdir(base_dir, who)
    server = Postgres(workdir, who=who, durable=config.durable, settings={
        "max_connections": config.max_connections,
        "superuser_reserved_connections": config.reserved_connections,
        "log_line_prefix": "%m [%p] ", "log_timezone": "UTC", "log_lock_waits": True,
    }, pg_version=config.pg_version)
    try:
        server.start()
        _prepare_template(server, config)
        versions = {"postgresql": server.version()}
        runs = [_one_run(server, config, strategy, index, report)
                for index in range(1, config.runs + 1) for strategy in config.strategies]
        runs.sort(key=lambda r: (config.strategies.index(r.strategy), r.run))
        return LockQueueResult(config, runs, versions)
    finally:
        server.stop(mode="immediate")
        shutil.rmtree(workdir, ignore_errors=True)


SCENARIO = Scenario(
    name="lock-queue",
    help="reproduce the blocked migration and restart loop, and the fix",
    description=f"Reproduce the lock-queue outage ({LOCK_QUEUE}): a long dashboard log "
                "query, a deploy whose migration queues behind it, liveness probes that "
                "restart gateway replicas, and sessions the killed replicas leave behind; then "
                "the same deploy under pgsteady. Prints per-second tables and a summary.",
    config=LockQueueConfig, run=run_lock_queue,
    report="pgsteady.lab.scenarios.lock_queue_report",
    seconds=lambda c: len(c.strategies) * c.runs * c.duration)


def _prepare_template(server: Postgres, config: LockQueueConfig) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        # The gateway is an ordinary role (superusers may take the reserved slots), with the
        # lab's password stored as its SCRAM secret and a passfile of its own.
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
            sql.Identifier(GATEWAY_ROLE), sql.Literal(_auth.scram_secret(server.password))))
    _auth.write_passfile(_gateway_passfile(server), GATEWAY_ROLE, server.password)
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(TEMPLATE), sql.Identifier(GATEWAY_ROLE)))
    with psycopg.connect(gateway_dsn(server, TEMPLATE), autocommit=True) as conn:
        for statement in q.SCHEMA:
            conn.execute(statement)
        conn.execute(q.FILL_ORGS, {"orgs": config.orgs})
        conn.execute(q.FILL_LOG, {"rows": config.log_rows, "orgs": config.orgs})
        conn.execute("VACUUM ANALYZE")


def _gateway_passfile(server: Postgres) -> Path:
    return server.workdir / "gateway.pgpass"


def gateway_dsn(server: Postgres, dbname: str) -> str:
    """The gateway role's DSN: secret-free, it names the gateway's passfile."""
    return server.dsn(dbname, user=GATEWAY_ROLE, passfile=str(_gateway_passfile(server)))


def _create_run_db(server: Postgres, name: str, strategy: str) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {} OWNER {}").format(
            sql.Identifier(name), sql.Identifier(TEMPLATE), sql.Identifier(GATEWAY_ROLE)))
        if strategy == "steady":
            # Seed: "The database will drop sessions whose client has disconnected".
            conn.execute(sql.SQL("ALTER DATABASE {} SET client_connection_check_interval "
                                 "= '1s'").format(sql.Identifier(name)))


def _one_run(server: Postgres, config: LockQueueConfig, strategy: str, index: int,
             report: Progress) -> RunResult:
    label = f"{strategy} run {index}"
    dbname = f"lq_{strategy}_{index}"
    _create_run_db(server, dbname, strategy)
    rundir = Path(tempfile.mkdtemp(prefix=f"{dbname}-", dir=server.workdir))
    configs = [GatewayConfig(
        name=f"r{i}", port=_process.free_port(), dsn=gateway_dsn(server, dbname),
        strategy=strategy, pool_size=config.pool_size, hot_keys=config.hot_keys,
        client_timeout=config.client_timeout,
        log_statement_timeout=config.log_statement_timeout) for i in range(config.replicas)]
    supervisor = Supervisor(configs, workdir=rundir, probe_interval=config.probe_interval,
                            failures=config.probe_failures)
    sampler: Sampler | None = None
    log_offset = _size(server.log_path)
    try:
        supervisor.start()
        supervisor.wait_ready(config.replicas, timeout=60)
        t0 = time.monotonic() + 0.5
        epoch0 = time.time() + (t0 - time.monotonic())
        supervisor.t0 = t0
        sampler = Sampler(server.dsn(dbname), server.port, t0, config.duration,
                          supervisor.ready_ports)
        sampler.start()
        deploy = _Deploy(config, strategy, supervisor=supervisor, old=configs[0], server=server,
                         dbname=dbname, t0=t0)
        outcomes = asyncio.run(_drive(config, t0, supervisor=supervisor, deploy=deploy,
                                      report=report, label=label))
        sampler.join(config.duration + 10)
    finally:
        if sampler is not None:
            sampler.stop()
        supervisor.stop()
        _drop_run_db(server, dbname)
    refused = refusals(_read_from(server.log_path, log_offset), epoch0)
    return _summarise(config, strategy, index, outcomes=outcomes, sampler=sampler,
                      supervisor=supervisor, deploy=deploy, refused=refused)


class _Deploy:
    """The deploy at ``deploy_at``: how each strategy ships the new version."""

    def __init__(self, config: LockQueueConfig, strategy: str, *, supervisor: Supervisor,
                 old: GatewayConfig, server: Postgres, dbname: str, t0: float) -> None:
        self.config, self.strategy, self.supervisor = config, strategy, supervisor
        self.old, self.server, self.dbname, self.t0 = old, server, dbname, t0
        self.tries = 0
        self.messages: list[str] = []
        self.failed_at: float | None = None
        self.error = ""

    async def run(self) -> None:
        if self.strategy == "naive":
            # The new version migrates at start-up, before it serves (and before it is live).
            self.supervisor.deploy(new_version(self.old, _process.free_port(),
                                               migrate_on_start=True))
            return
        # steady: the migration is its own deploy step, then the new version rolls out.
        try:
            await asyncio.to_thread(self._migrate)
        except PgsteadyError as exc:
            self.failed_at = time.monotonic() - self.t0
            self.error = str(exc)
            log.warning("deploy step failed; the old version keeps serving: %s", exc)
            return
        self.supervisor.deploy(new_version(self.old, _process.free_port(),
                                           migrate_on_start=False))

    def _migrate(self) -> None:
        from pgsteady.migrate import Policy, load_dir, migrate  # noqa: PLC0415

        folder = Path(tempfile.mkdtemp(prefix="migrations-", dir=self.server.workdir))
        (folder / "0002_add_region.sql").write_text(MIGRATION + ";\n")
        budget = max(1.0, self.config.duration - self.config.deploy_at - 2)
        policy = Policy(lock_timeout=self.config.lock_timeout, first_lock_timeout=0.1,
                        retries=1000, retry_budget=budget, first_wait=0.1, max_wait=0.5,
                        statement_timeout=10.0, runner_wait=5.0)
        capture = _Capture()
        logger = logging.getLogger("pgsteady.migrate")
        logger.addHandler(capture)
        propagate, logger.propagate = logger.propagate, False  # kept here, summed up below
        try:
            applied = migrate(gateway_dsn(self.server, self.dbname),
                              load_dir(folder), policy, check_first=False)
            self.tries = applied[0].tries if applied else 0
        except MigrationError:
            self.tries = sum("could not get its locks" in m for m in capture.messages)
            raise
        finally:
            logger.removeHandler(capture)
            logger.propagate = propagate
            self.messages = capture.messages
            retried = [m for m in capture.messages if "could not get its locks" in m]
            if retried:
                log.info("deploy step: %d tries gave up on their lock_timeout; the first was %s",
                         len(retried), retried[0][:300])


class _Capture(logging.Handler):
    """Keeps what ``pgsteady migrate`` logs about each try (it names the blocker)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.messages) < 10_000:
            self.messages.append(record.getMessage())


async def _drive(config: LockQueueConfig, t0: float, *, supervisor: Supervisor,
                 deploy: _Deploy, report: Progress, label: str) -> Outcomes:
    mix = Mix(cached=config.cached_share, dashboard=config.dashboard_share)
    generator = LoadGenerator(
        rate=config.rate, duration=config.duration, t0=t0, ready_ports=supervisor.ready_ports,
        hot_keys=config.hot_keys, first_cold_key=config.hot_keys + 1, org_count=config.orgs,
        client_timeout=config.client_timeout, mix=mix)
    tasks = [asyncio.ensure_future(_at(t0 + at, lambda: _long_query(supervisor, config)))
             for at in config.long_query_at]
    tasks.append(asyncio.ensure_future(_at(t0 + config.deploy_at, deploy.run)))
    tasks.append(asyncio.ensure_future(_tick(report, label, t0, config.duration)))
    try:
        return await generator.run()
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)


async def _at(when: float, start: Callable[[], Awaitable[None]]) -> None:
    await asyncio.sleep(max(0.0, when - time.monotonic()))
    await start()


async def _long_query(supervisor: Supervisor, config: LockQueueConfig) -> None:
    """A dashboard user opens the log page whose query takes the bad plan."""
    ports = supervisor.ready_ports()
    if ports:
        await get(ports[0], f"/dashboard/logs?org=1&hold={config.long_query_for:g}",
                  config.long_query_for + 5)


async def _tick(report: Progress, label: str, t0: float, duration: float) -> None:
    second = 0
    while second < duration:
        await asyncio.sleep(max(0.0, t0 + second + 1 - time.monotonic()))
        second += 1
        report(label, 1.0)


def _drop_run_db(server: Postgres, dbname: str) -> None:
    with contextlib.suppress(psycopg.Error), \
            psycopg.connect(server.dsn(), autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(dbname)))


def refusals(log_text: str, epoch0: float) -> list[float]:
    """Seconds since the run began at which PostgreSQL refused a connection for lack of slots
    (its log lines start with a UTC millisecond timestamp, ``%m``)."""
    times = []
    for line in log_text.splitlines():
        if not any(words in line for words in q.REFUSED):
            continue
        try:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f")
        except ValueError:
            continue
        times.append(round(stamp.replace(tzinfo=UTC).timestamp() - epoch0, 3))
    return times


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _summarise(config: LockQueueConfig, strategy: str, index: int, *, outcomes: Outcomes,
               sampler: Sampler | None, supervisor: Supervisor, deploy: _Deploy,
               refused: list[float]) -> RunResult:
    if sampler is None:
        raise LabError("the run ended before it was measured")
    seconds = outcomes.seconds
    restart_times = [round(at, 2) for at, _ in supervisor.events.restarts if at >= 0]
    samples = sampler.per_second(seconds)
    migration = Migration()
    if sampler.applied_at is not None:
        migration.applied, migration.applied_at_s = True, round(sampler.applied_at, 2)
    if strategy == "naive":
        # Each start of the new version runs the migration once; the database saw the ALTERs.
        starts = sum(r.starts for r in supervisor.replicas if r.config.version == 2)
        migration.tries = max(len(sampler.alter_pids), starts)
    else:
        migration.tries = deploy.tries
        long_pids = {str(pid) for pid in sampler.long_query_pids}
        migration.blocker_named = any(f"pid {pid} " in m for m in deploy.messages
                                      for pid in long_pids)
    migration.error = deploy.error[:300]
    rows = []
    for t in range(seconds):
        s = samples[t]
        restarts_now = sum(1 for at in restart_times if t <= at < t + 1)
        if deploy.failed_at is not None and t >= int(deploy.failed_at) \
                and not migration.applied:
            state = "failed"
        elif migration.applied and t >= int(migration.applied_at_s or 0):
            state = "applied"
        elif s["alter_waiting"]:
            state = "waiting"
        elif t >= config.deploy_at:
            state = "retrying"
        else:
            state = "-"
        rows.append({
            "t": t,
            "ok": {c: outcomes.ok[c][t] for c in CLASSES},
            "failed": {c: outcomes.failed[c][t] for c in CLASSES},
            "timed_out": {c: outcomes.timed_out[c][t] for c in CLASSES},
            "p99_ms": round(p99(outcomes.latencies[t]), 1),
            "sessions": s["sessions"], "queued_on_lock": s["queued_on_lock"],
            "lock_queue_orgs": s["lock_queue_orgs"], "left_behind": s["left_behind"],
            "restarts": restarts_now, "replicas_ready": s["replicas_ready"],
            "migration": state, "long_query": s["long_query"],
            "refused": sum(1 for at in refused if t <= at < t + 1),
        })
    return RunResult(strategy, index, verdict(rows), bool(refused), len(restart_times), migration,
                     rows, totals(rows), long_queries=sampler.long_query_spans(),
                     restart_times=restart_times, pids=list(supervisor.pids))


def answered_share(row: dict[str, Any], kind: str = "uncached") -> float | None:
    sent = row["ok"][kind] + row["failed"][kind] + row["timed_out"][kind]
    return row["ok"][kind] / sent if sent else None


def verdict(rows: list[dict[str, Any]]) -> str:
    """``outage`` if uncached lookups were answered < 50 % for 10 s or more in a row."""
    streak = 0
    for row in rows:
        share = answered_share(row)
        if share is not None and share < OUTAGE_BELOW:
            streak += 1
            if streak >= OUTAGE_SECONDS:
                return _verdicts.OUTAGE.word
        elif share is not None:
            streak = 0
    return _verdicts.LOCK_QUEUE_HELD.word


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for outcome in ("ok", "failed", "timed_out"):
        out[outcome] = {c: sum(r[outcome][c] for r in rows) for c in CLASSES}
    sent = {c: out["ok"][c] + out["failed"][c] + out["timed_out"][c] for c in CLASSES}
    out["answered_share"] = {c: round(out["ok"][c] / sent[c], 4) if sent[c] else None
                             for c in CLASSES}
    out["uncached_failing_seconds_longest"] = _longest(
        [r["failed"]["uncached"] + r["timed_out"]["uncached"] > 0 for r in rows])
    out["peak_sessions"] = max((r["sessions"] for r in rows), default=0)
    out["peak_queued_on_lock"] = max((r["queued_on_lock"] for r in rows), default=0)
    out["peak_lock_queue_orgs"] = max((r["lock_queue_orgs"] for r in rows), default=0)
    out["peak_left_behind"] = max((r["left_behind"] for r in rows), default=0)
    out["connections_refused"] = sum(r["refused"] for r in rows)
    out["first_refused_s"] = next((r["t"] for r in rows if r["refused"]), None)
    out["worst_p99_ms"] = max((r["p99_ms"] for r in rows), default=0.0)
    return out


def _longest(flags: list[bool]) -> int:
    best = run = 0
    for flag in flags:
        run = run + 1 if flag else 0
        best = max(best, run)
    return best

