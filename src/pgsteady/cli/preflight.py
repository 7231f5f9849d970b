"""``pgsteady preflight``: name the sessions that would block the pending migrations."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pgsteady.cli.migrate import NUMERIC, SCHEMA_VERSION, add_common, dsn_of, policy_of
from pgsteady.errors import EXIT_FAILURE, EXIT_OK
from pgsteady.migrate import apply, source
from pgsteady.migrate.preflight import Report


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "preflight", help="what would block the pending migrations, naming the sessions",
        description="Parse the pending migrations, find the tables each statement locks and "
                    "the lock it needs, and list live sessions that hold or wait for a "
                    "conflicting lock there (or, for CREATE INDEX CONCURRENTLY, hold an old "
                    "snapshot). Applies nothing.",
        epilog="exit codes: 0 nothing in the way, 1 blocking sessions found (or the folder "
               "and the history disagree: an edited, missing or unfinished version), 2 usage "
               "error or bad migration file, 3 cannot connect")
    add_common(parser)
    parser.set_defaults(run=run)


_NAMED = 10  # pending migrations listed by name; the rest counted


def _pending(report: Report) -> str:
    """``: 0002_add.sql, 0003_idx.sql`` (the first few, then how many more)."""
    labels = [m.label for m in report.pending[:_NAMED]]
    more = len(report.pending) - len(labels)
    return (": " + ", ".join(labels) + (f" and {more} more" if more else "")) if labels else ""


def print_report(report: Report) -> None:
    out = sys.stdout
    if report.ok:
        print(f"preflight ok: {len(report.pending)} pending migration(s), no session in the "
              f"way{_pending(report)}", file=out)
        for m in report.pending:
            if m.elsewhere is not None:
                print(f"note: {m.label} is {m.elsewhere}; pgsteady migrate stops before it",
                      file=out)
        return
    pids = sorted({b.session.pid for b in report.blockers})
    print(f"preflight refused: {len(pids)} session(s) would block "
          f"{len(report.pending)} pending migration(s){_pending(report)}", file=out)
    for blocker in report.blockers:
        print(f"- {blocker.describe()}", file=out)
        if blocker.session.query:
            print(f"  query: {blocker.session.query}", file=out)
    print(f"next: wait for them to finish, or end them with SELECT pg_terminate_backend(pid) "
          f"(pid {', '.join(map(str, pids))}); then run pgsteady migrate", file=out)


def run(args: argparse.Namespace) -> int:
    migrations = source.load_dir(args.dir, args.layout)
    report = apply.run_preflight(dsn_of(args), migrations, policy_of(args))
    if args.json:
        print(json.dumps({
            "schema_version": SCHEMA_VERSION, "ok": report.ok,
            "pending": [{"version": m.version if m.layout in NUMERIC else m.tag,
                         "name": m.name, "file": str(m.path)}
                        for m in report.pending],
            "blockers": [b.as_dict() for b in report.blockers]}, indent=2))
    else:
        print_report(report)
    return EXIT_OK if report.ok else EXIT_FAILURE
