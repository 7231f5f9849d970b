"""Made-up lab results in the shapes the scenarios produce, for the renderers' tests (no
database: the scenarios' own tests run the real thing)."""

from __future__ import annotations

from typing import Any

from pgsteady.lab.scenarios.lock_queue import (
    LockQueueConfig,
    LockQueueResult,
    Migration,
    totals,
    verdict,
)
from pgsteady.lab.scenarios.lock_queue import RunResult as LockQueueRun
from pgsteady.lab.scenarios.pool_drain import PoolDrainConfig, PoolDrainResult, RunResult
from pgsteady.lab.scenarios.pool_drain import verdict as pool_drain_verdict

CLASSES = ("cached", "uncached", "dashboard")


def pool_drain_run(strategy: str, answered: list[int], timeouts: list[int]) -> RunResult:
    rows = [{"t": t, "answered": a, "timeouts": m, "rejected": 0, "db_completions": a,
             "server_connections_opened": 0, "not_ready_closures": 0, "cl_waiting": 0,
             "sv_active": 4.0, "sv_login": 0.0}
            for t, (a, m) in enumerate(zip(answered, timeouts, strict=True))]
    collapsed, recovered = pool_drain_verdict(answered)
    totals = {k: sum(r[k] for r in rows) for k in rows[0] if k != "t"}
    return RunResult(strategy, 1, collapsed, recovered, rows, totals)


def pool_drain_result(ceiling: float = 700.0) -> PoolDrainResult:
    """steady: back by the last third, but a few callers timed out during the burst."""
    steady = pool_drain_run("steady", [650] * 15, [0] * 5 + [3] * 5 + [0] * 5)
    naive = pool_drain_run("naive", [650] * 5 + [0] * 10, [0] * 5 + [50] * 10)
    return PoolDrainResult(PoolDrainConfig(), ceiling, [naive, steady],
                           {"pgbouncer": "PgBouncer 1.18.0"})


def lock_queue_rows(seconds: int, failing: range) -> list[dict[str, Any]]:
    rows = []
    for t in range(seconds):
        bad = t in failing
        rows.append({
            "t": t, "ok": {c: 0 if bad else 10 for c in CLASSES},
            "failed": {c: 10 if bad else 0 for c in CLASSES},
            "timed_out": dict.fromkeys(CLASSES, 0), "p99_ms": 12.5,
            "sessions": 40 if bad else 10, "queued_on_lock": 30 if bad else 0,
            "lock_queue_orgs": 30 if bad else 0, "left_behind": 20 if bad else 0,
            "restarts": 1 if t == 5 else 0, "replicas_ready": 3, "migration": "waiting",
            "long_query": bad, "refused": 2 if t == 7 else 0,
        })
    return rows


def lock_queue_result() -> LockQueueResult:
    config = LockQueueConfig(duration=20.0)
    runs = []
    for strategy, failing in (("naive", range(3, 18)), ("steady", range(0))):
        rows = lock_queue_rows(20, failing)
        runs.append(LockQueueRun(strategy, 1, verdict(rows), strategy == "naive",
                                 1 if strategy == "naive" else 0,
                                 Migration(applied=True, applied_at_s=11.0, tries=5,
                                           blocker_named=strategy == "steady"),
                                 rows, totals(rows), long_queries=[(2.0, 17.5)],
                                 restart_times=[5.2] if strategy == "naive" else []))
    return LockQueueResult(config, runs, {"postgresql": "15"})
