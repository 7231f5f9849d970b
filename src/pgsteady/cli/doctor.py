"""``pgsteady doctor``: one look at PostgreSQL and PgBouncer that names what is wrong and the fix.

Exit codes: 0 nothing at or above ``--fail-on``, 1 findings at or above it, 2 usage error
(including a DSN pointed at the wrong kind of server), 3 cannot connect.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from typing import Any

from pgsteady.cli import _args
from pgsteady.errors import EXIT_FAILURE, EXIT_OK, UsageError

SCHEMA_VERSION = 1
_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "doctor", help="findings for a PostgreSQL and (optionally) a PgBouncer, with fixes",
        description="Take one read-only look at PostgreSQL (--dsn) and/or PgBouncer's admin "
                    "console (--pgbouncer, sampled --samples times --interval apart) and its "
                    "log (--pgbouncer-log), and report what is wrong, most severe first: "
                    "lock queues and their root blockers, long and idle transactions, the "
                    "xmin horizon, connection use, risky settings, pools stuck refilling, "
                    "connections destroyed by leaving clients. Each finding has an id, its "
                    "evidence and the fix. Doctor's session is labelled "
                    "pgsteady-doctor@host:pid, read-only, with a 100 ms lock_timeout.",
        epilog="exit codes: 0 no finding at or above --fail-on, 1 findings, 2 usage error or "
               "a DSN pointed at the wrong server, 3 cannot connect")
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: $PGSTEADY_DSN; PG* variables "
                                      "when no other source is given)")
    parser.add_argument("--pgbouncer", metavar="ADMIN_DSN",
                        help="PgBouncer's admin console, e.g. 'host=... port=6432 "
                             "dbname=pgbouncer user=...'")
    parser.add_argument("--pgbouncer-log", metavar="FILE", help="PgBouncer's log file")
    parser.add_argument("--samples", type=_args.positive_int, default=3,
                        help="PgBouncer readings (default 3, at most 60)")
    parser.add_argument("--interval", type=_args.duration, default=1.0,
                        help="time between PgBouncer readings (default 1s)")
    parser.add_argument("--app-deadline", type=_args.duration, default=None,
                        help="your services' query deadline, e.g. 50ms (judges PgBouncer's "
                             "query_wait_timeout and min_pool_size)")
    parser.add_argument("--blocked-for", type=_args.duration, default=5.0,
                        help="report a blocking chain once someone waited this long (5s)")
    parser.add_argument("--long", type=_args.duration, default=300.0,
                        help="a transaction open this long is long (default 5m)")
    parser.add_argument("--idle-in-transaction", type=_args.duration, default=60.0,
                        help="idle in a transaction this long is reported (default 1m)")
    parser.add_argument("--xmin-age", type=_args.duration, default=3600.0,
                        help="a snapshot held this long holds vacuum back (default 1h)")
    parser.add_argument("--timeout", type=_args.duration, default=10.0,
                        help="give up on PostgreSQL after this long (default 10s)")
    parser.add_argument("--fail-on", choices=("warning", "critical"), default="warning",
                        help="exit 1 when a finding at or above this exists (default warning)")
    parser.add_argument("--json", action="store_true", help="print data as JSON")
    parser.set_defaults(run=run)


@dataclass
class Examination:
    """What doctor looked at and what it found."""

    findings: list[Any] = field(default_factory=list)
    checked: dict[str, Any] = field(default_factory=dict)


def examine(args: argparse.Namespace) -> Examination:
    from pgsteady.inspect import pgbouncer, postgres
    from pgsteady.inspect.findings import Thresholds, postgres_findings, rank
    from pgsteady.inspect.findings_pgbouncer import pgbouncer_findings

    if args.timeout <= 0:
        raise UsageError("--timeout must be more than 0, e.g. 10s")
    if args.samples > pgbouncer.MAX_SAMPLES:
        raise UsageError(f"--samples must be at most {pgbouncer.MAX_SAMPLES} (one look, not "
                         "a monitor: use pgsteady watch for longer)")
    dsn = _args.dsn_from(args)
    if dsn is None and not args.pgbouncer and not args.pgbouncer_log:
        if not _args.libpq_environment():
            raise UsageError("nothing to examine: give --dsn (or PGSTEADY_DSN), --pgbouncer "
                             "ADMIN_DSN and/or --pgbouncer-log FILE")
        dsn = ""  # libpq's PG* variables
    th = Thresholds(blocked_for=args.blocked_for, long_transaction=args.long,
                    idle_in_transaction=args.idle_in_transaction, xmin_horizon=args.xmin_age,
                    app_deadline=args.app_deadline)
    result = Examination()
    latency = None
    if dsn is not None:
        snap = postgres.take_snapshot(dsn, timeout=args.timeout)
        latency = snap.connect_seconds
        result.findings += postgres_findings(snap, th)
        result.checked["postgres"] = {
            "dsn": snap.dsn, "version": snap.version, "database": snap.database,
            "user": snap.user, "sessions": len(snap.sessions), "chains": len(snap.chains),
            "connections_used": snap.connections_used,
            "connections_usable": snap.usable_connections,
            "connect_s": round(snap.connect_seconds, 4), "elapsed_s": round(snap.elapsed, 4)}
    bouncer = log = None
    if args.pgbouncer:
        bouncer = pgbouncer.sample(args.pgbouncer, samples=args.samples,
                                   interval=args.interval)
        result.checked["pgbouncer"] = {
            "dsn": bouncer.dsn, "version": bouncer.version, "samples": len(bouncer.samples),
            "interval_s": bouncer.interval,
            "pools": [f"{d}/{u}" for d, u in bouncer.pool_series()]}
    if args.pgbouncer_log:
        log = pgbouncer.scan_log(args.pgbouncer_log)
        result.checked["pgbouncer_log"] = {
            "path": log.path, "truncated": log.truncated, "last_minute": dict(log.last_minute),
            "ends_at": log.last_epoch}
    if bouncer is not None or log is not None:
        result.findings += pgbouncer_findings(bouncer, log, th, connect_latency=latency)
    result.findings.sort(key=rank)
    return result


def run(args: argparse.Namespace) -> int:
    from pgsteady.inspect.findings import at_least

    started = time.monotonic()
    result = examine(args)
    failing = at_least(result.findings, args.fail_on)
    if args.json:
        print(json.dumps({"schema_version": SCHEMA_VERSION,
                          "findings": [f.as_dict() for f in result.findings],
                          "checked": result.checked}, indent=2, default=str))
    else:
        render(result, args.fail_on, time.monotonic() - started, failing=bool(failing))
    return EXIT_FAILURE if failing else EXIT_OK


def render(result: Examination, fail_on: str, elapsed: float, *, failing: bool) -> None:
    """The report for a person: most severe first, each with its evidence and fix."""
    from collections import Counter

    from rich.text import Text

    from pgsteady.cli._console import console as make_console

    console = make_console(highlight=False, soft_wrap=True, width=None)
    pg, bouncer, log = (result.checked.get(k) for k in ("postgres", "pgbouncer",
                                                          "pgbouncer_log"))
    looked = []
    if pg:
        looked.append(f"PostgreSQL {pg['version'].split()[0]} ({pg['database']}, "
                      f"{pg['sessions']} sessions, {pg['connections_used']}/"
                      f"{pg['connections_usable']} slots)")
    if bouncer:
        looked.append(f"PgBouncer {bouncer['version'].split()[-1]} ({bouncer['samples']} "
                      f"samples, {len(bouncer['pools'])} pools)")
    if log:
        looked.append(f"log {log['path']}")
    console.print(Text(f"pgsteady doctor: {'; '.join(looked)} in {elapsed:.2f}s"))
    for finding in result.findings:
        console.print()
        line = Text()
        line.append(f"{finding.severity.upper():8}", style=_STYLE[finding.severity])
        line.append(f" {finding.id}", style="bold")
        line.append(f"  {finding.title}")
        console.print(line)
        for key, value in finding.evidence.items():
            for text in _evidence_lines(key, value):
                console.print(Text(f"    {text}"))
        for i, fix in enumerate(finding.fix.splitlines()):
            console.print(Text(f"    {'fix: ' if i == 0 else '     '}{fix}", style="green"))
    counts = Counter(f.severity for f in result.findings)
    console.print()
    if not result.findings:
        console.print(Text("no findings"))
    else:
        verdict = (f"exit 1: findings at or above --fail-on {fail_on}" if failing
                   else f"exit 0: nothing at or above --fail-on {fail_on}")
        console.print(Text(", ".join(f"{counts[s]} {s}" for s in ("critical", "warning", "info")
                                     if counts[s]) + f" ({verdict})"))


def _evidence_lines(key: str, value: Any) -> list[str]:
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        lines = [f"{key}:"]
        lines += [f"  - {_session_line(v) if 'pid' in v else _pairs(v)}" for v in value]
        return lines
    if isinstance(value, dict):
        if "pid" in value:
            return [f"{key}: {_session_line(value)}"]
        return [f"{key}: {_pairs(value)}"] if value else []
    if value is None or value == []:
        return []
    return [f"{key}: {value}"]


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in values.items() if v not in (None, "", []))


def _session_line(s: dict[str, Any]) -> str:
    from pgsteady.inspect.findings import age_text

    parts = [f"pid {s['pid']} '{s.get('application_name') or 'no application_name'}'"]
    parts += [f"user {s['user']}" if s.get("user") else "", s.get("client") or "",
              s.get("state") or ""]
    if s.get("xact_age_s") is not None:
        parts.append(f"transaction {age_text(s['xact_age_s'])}")
    if s.get("wait_age_s") is not None:
        parts.append(f"waiting {age_text(s['wait_age_s'])}")
    elif s.get("query_age_s") is not None:
        parts.append(f"query {age_text(s['query_age_s'])}")
    text = ", ".join(p for p in parts if p)
    if s.get("query"):
        query = s["query"]
        text += f": {query if len(query) <= 100 else query[:97] + '...'}"
    return text
