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


# Markup, script and CSS that must reach the page as text only, wherever a file puts them.
PAYLOADS = (
    'x" onload="alert(1)" a="',
    "x' onmouseover='alert(2)' b='",
    "</script><script>alert(3)</script>",
    "<svg onload=alert(4)>",
    '<img src="data:," onerror="alert(5)">',
    "javascript:alert(6)",
    "red;background:url(javascript:alert(7))",
    "x{color:expression(alert(8))}",
    "</style><style>*{background:url(http://127.0.0.1:9/x.png)}</style>",
    "--><!--<![CDATA[ &amp; \u2028",
)


def hostile(index: int) -> str:
    """One payload, tagged with ``index`` so every field's value is a distinct string."""
    return f"{PAYLOADS[index % len(PAYLOADS)]}#{index}"


def pool_drain(strategies: tuple[str, ...], seconds: int = 6) -> dict[str, Any]:
    """The shape `pgsteady lab pool-drain --json` writes, small: one run per strategy."""
    runs = []
    for number, strategy in enumerate(strategies, 1):
        rows = [{"t": t, "answered": 500 - 40 * t, "timeouts": 10 * t, "rejected": 1,
                 "db_completions": 480, "server_connections_opened": t,
                 "not_ready_closures": t, "cl_waiting": 2, "sv_login": 0}
                for t in range(seconds)]
        runs.append({"strategy": strategy, "run": number, "collapsed": number == 1,
                     "recovered": number != 1, "per_second": rows,
                     "totals": {"answered": 2400, "timeouts": 150,
                                "server_connections_opened": 15, "not_ready_closures": 15}})
    return {"schema_version": 1, "scenario": "pool-drain", "source": "lab",
            "config": {"pool_size": 4, "workers": 10, "connect_latency": 0.05,
                       "query_time": 0.005, "deadline": 0.05, "burst_workers": 30,
                       "burst_start": 1.0, "burst_end": 2.0, "stall": 0.1, "stall_at": 3.0},
            "ceiling": {"pgbench_tps": 600.0}, "runs": runs}


def write_hostile_inputs(folder: Path) -> list[Path]:
    """Lab and model files with a payload in every string field the page shows."""
    folder.mkdir(parents=True, exist_ok=True)
    n = iter(range(1000))
    drain = pool_drain((hostile(next(n)), hostile(next(n))))
    drain["config"].update({"pool_size": hostile(next(n)), "workers": hostile(next(n)),
                            "burst_workers": hostile(next(n)), hostile(next(n)): hostile(next(n)),
                            "versions": {"postgresql": hostile(next(n)),
                                         hostile(next(n)): "1"}})
    drain["machine"] = {"cores": hostile(next(n))}
    drain["runs"][0]["run"] = hostile(next(n))
    drain["runs"][0]["totals"]["answered"] = hostile(next(n))
    queue = lock_queue((hostile(next(n)), hostile(next(n))))
    queue["runs"][0]["verdict"] = hostile(next(n))
    queue["runs"][0]["migration"]["tries"] = hostile(next(n))
    queue["config"].update({hostile(next(n)): [hostile(next(n)), hostile(next(n))],
                            "versions": {"pgbouncer": hostile(next(n))}})
    pm = phase_map()
    pm["x"] = {"knob": hostile(next(n)), "values": [hostile(next(n)), hostile(next(n)), 8]}
    pm["y"]["knob"] = hostile(next(n))
    pm["collapse_probability"] = {hostile(next(n)): v
                                  for v in pm["collapse_probability"].values()}
    pm["config"][hostile(next(n))] = hostile(next(n))
    sv = sim_validate()
    sv["cells"][0].update({"strategy": hostile(next(n)), "pool_size": hostile(next(n))})
    sv["cells"][0]["lab"]["verdict"] = hostile(next(n))
    sv["cells"][1]["model"]["answered_per_second_thirds"] = [hostile(next(n))]
    unknown = {"schema_version": 1, "scenario": hostile(next(n)), "source": "lab",
               "config": {hostile(next(n)): hostile(next(n))},
               "runs": [{"strategy": hostile(next(n)), "run": 1, "verdict": hostile(next(n))}]}
    return [write(folder / "pool-drain.json", drain), write(folder / "lock-queue.json", queue),
            write(folder / "phase-map.json", pm), write(folder / "validate.json", sv),
            write(folder / f"{PAYLOADS[0]}{PAYLOADS[3]}.json", unknown)]
