"""Result files in the shapes the labs and the model write, for the renderer's tests.

The pool-drain file in the browser test comes from a real (shortened) lab run; these small
hand-made ones cover the lock-queue shape and mixtures without minutes of lab time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def lock_queue(strategies: tuple[str, ...] = ("naive", "steady"), seconds: int = 20) -> dict[str, Any]:
    runs = []
    for strategy in strategies:
        naive = strategy == "naive"
        rows = []
        restarts = 0
        for t in range(seconds):
            stuck = naive and t >= 8
            if naive and t in (11, 14, 17):
                restarts += 1
            rows.append({
                "t": t,
                "ok": {"cached": 60, "uncached": 0 if stuck else 80, "dashboard": 0 if stuck else 20},
                "failed": {"cached": 0, "uncached": 80 if stuck else 0, "dashboard": 20 if stuck else 0},
                "p99_ms": 10_000.0 if stuck else 12.0,
                "sessions": min(60, 20 + 4 * t) if naive else 22,
                "queued_on_lock": 30 if stuck else 0,
                "lock_queue_orgs": 30 if stuck else 0,
                "restarts": restarts,
                "replicas_ready": 1 if stuck else 3,
            })
        runs.append({
            "strategy": strategy, "run": 1, "verdict": "outage" if naive else "held",
            "connections_exhausted": naive, "restarts": restarts,
            "migration": {"applied": not naive, "applied_at_s": None if naive else 12.5,
                          "tries": 1 if naive else 4, "blocker_named": not naive},
            "per_second": rows, "totals": {},
        })
    return {"schema_version": 1, "scenario": "lock-queue", "source": "lab",
            "config": {"replicas": 3, "rate": 200, "long_query_for": 40.0, "deploy_at": 8.0,
                       "duration": float(seconds), "max_connections": 60,
                       "versions": {"postgresql": "15"}},
            "runs": runs}


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data))
    return path
