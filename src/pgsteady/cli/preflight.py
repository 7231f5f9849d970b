"""``pgsteady preflight``: name the sessions that would block the pending migrations."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pgsteady.cli.migrate import SCHEMA_VERSION, add_common, dsn_of, policy_of
from pgsteady.errors import EXIT_FAILURE, EXIT_OK
from pgsteady.migrate import apply, source
from pgsteady.migrate.preflight import Report
from pgsteady.tools import registry


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "preflight", help="what would block the pending migrations, naming the sessions",
        description="Parse the pending migrations, find the tables each statement locks and "
                    "the lock it needs (reading the DO blocks, the bodies of the functions "
                    "called and of the triggers fired), and list live sessions that hold or "
                    "wait for a "
                    "conflicting lock there (or, for CREATE INDEX CONCURRENTLY, hold an old "
                    "snapshot). Applies nothing.",
        epilog="exit codes: 0 nothing in the way, 1 blocking sessions found, or a statement "
               "whose locks preflight cannot know (an EXECUTE of a computed string in a DO "
               "block or a function's body, a function written in C or found nowhere; see "
               "--allow-unknown), or the folder and the history disagree (an "
               "edited, missing or unfinished version), 2 usage error or bad migration file, "
               "3 cannot connect")
    add_common(parser)
    parser.add_argument("--allow-unknown", action="store_true",
                        help="exit 0 when no session is in the way even if some statements' "
                             "locks cannot be known (they are still listed); for statements "
                             "a person has read")
    parser.set_defaults(run=run)


_NAMED = 10  # pending migrations listed by name; the rest counted


def _pending(report: Report) -> str:
    """``: 0002_add.sql, 0003_idx.sql`` (the first few, then how many more)."""
    labels = [m.label for m in report.pending[:_NAMED]]
    more = len(report.pending) - len(labels)
    return (": " + ", ".join(labels) + (f" and {more} more" if more else "")) if labels else ""


def _print_unknown(report: Report, headline: str) -> None:
    print(f"{headline} {len(report.unknown)} statement(s):", file=sys.stdout)
    for unknown in report.unknown:
        print(f"- {unknown.describe()}", file=sys.stdout)


def print_report(report: Report, *, allow_unknown: bool = False) -> None:
    out = sys.stdout
    if report.ok and (allow_unknown or not report.unknown):
        print(f"preflight ok: {len(report.pending)} pending migration(s), no session in the "
              f"way{_pending(report)}", file=out)
        for m in report.pending:
            if m.elsewhere is not None:
                print(f"note: {m.label} is {m.elsewhere}; pgsteady migrate stops before it",
                      file=out)
        if report.unknown:
            _print_unknown(report, "note: --allow-unknown accepted the unknown locks of")
        return
    if report.ok:
        _print_unknown(report, f"preflight cannot say ok for {len(report.pending)} pending "
                               f"migration(s){_pending(report)}; it cannot know the locks of")
        print("next: read them; run again with --allow-unknown if they are safe (pgsteady "
              "migrate's lock_timeout still gives up on a lock it cannot get)", file=out)
        return
    pids = sorted({b.session.pid for b in report.blockers})
    print(f"preflight refused: {len(pids)} session(s) would block "
          f"{len(report.pending)} pending migration(s){_pending(report)}", file=out)
    for blocker in report.blockers:
        print(f"- {blocker.describe()}", file=out)
        if blocker.session.query:
            print(f"  query: {blocker.session.query}", file=out)
    print(f"next: wait for them to finish, or {report.what_to_end()}; then run pgsteady "
          f"migrate", file=out)
    if report.unknown:
        _print_unknown(report, "also: preflight cannot know the locks of")


def run(args: argparse.Namespace) -> int:
    migrations = source.load_dir(args.dir, args.tool)
    report = apply.run_preflight(dsn_of(args), migrations, policy_of(args))
    ok = report.clear or (report.ok and args.allow_unknown)
    if args.json:
        print(json.dumps({
            "schema_version": SCHEMA_VERSION, "ok": ok,
            "pending": [{"version": m.version if registry.get(m.tool).numeric else m.tag,
                         "name": m.name, "file": str(m.path)}
                        for m in report.pending],
            "blockers": [b.as_dict() for b in report.blockers],
            "unknown": [u.as_dict() for u in report.unknown]}, indent=2))
    else:
        print_report(report, allow_unknown=args.allow_unknown)
    return EXIT_OK if ok else EXIT_FAILURE
