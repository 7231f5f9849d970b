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
                       "long_query_at": [2.0], "reserved_connections": 3,
                       "duration": float(seconds), "max_connections": 60,
                       "versions": {"postgresql": "15"}},
            "runs": runs}


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data))
    return path


def phase_map() -> dict[str, Any]:
    """The shape `pgsteady sim phase-map` writes: probabilities per strategy, rows by y."""
    return {"schema_version": 1, "scenario": "phase-map", "source": "sim",
            "config": {"pool_size": 4, "connect_latency": 0.05, "deadline": 0.05, "runs": 4},
            "x": {"knob": "pool-size", "values": [2, 4, 8]},
            "y": {"knob": "connect-latency", "values": [0.01, 0.05, 0.1]},
            "runs": 4,
            "collapse_probability": {"naive": [[1.0, 0.25, 0.0], [1.0, 0.75, 0.25],
                                               [1.0, 1.0, 0.5]],
                                     "steady": [[0.0] * 3, [0.0] * 3, [0.0] * 3]}}


def sim_validate() -> dict[str, Any]:
    """The shape `pgsteady sim validate --json` writes: lab against model, cell by cell."""
    def side(verdict: str, thirds: list[float]) -> dict[str, Any]:
        return {"verdict": verdict, "collapsed": int(verdict == "collapsed"), "runs": 3,
                "answered_per_second_thirds": thirds, "server_connections_opened": 0.0}
    cells = [{"pool_size": 4, "connect_latency": 0.05, "stall": 0.0, "strategy": "naive",
              "pgbench_tps": 620.0, "calibrated_round_trip": 0.0006,
              "lab": side("collapsed", [700, 20, 0]), "model": side("collapsed", [690, 15, 0]),
              "verdicts_agree": True, "answered_difference": None},
             {"pool_size": 4, "connect_latency": 0.05, "stall": 0.0, "strategy": "steady",
              "pgbench_tps": 620.0, "calibrated_round_trip": 0.0006,
              "lab": side("held", [600, 610, 600]), "model": side("held", [620, 615, 620]),
              "verdicts_agree": True, "answered_difference": 0.033}]
    return {"schema_version": 1, "scenario": "sim-validate", "verdict_agreement": 1.0,
            "worst_answered_difference": 0.033,
            "bars": {"verdict_agreement": 0.9, "answered_difference": 0.1}, "passed": True,
            "cells": cells}
