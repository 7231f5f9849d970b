"""``pgsteady migrate``: apply pending migrations that give up fast and leave nothing behind."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from pgsteady.cli import _args
from pgsteady.errors import EXIT_OK, MigrationError
from pgsteady.migrate import apply, source
from pgsteady.migrate.analysis import Reach
from pgsteady.migrate.source import Migration

SCHEMA_VERSION = 1


def add_common(parser: argparse.ArgumentParser) -> None:
    """Options ``migrate`` and ``preflight`` share."""
    parser.add_argument("--dsn", help="libpq DSN or URL (default: $PGSTEADY_DSN, then the "
                                      "PG* environment variables)")
    parser.add_argument("--dir", default="migrations",
                        help="folder of <version>_<name>.sql files (default: migrations)")
    parser.add_argument("--blocker-age", type=_args.duration, default=1.0,
                        help="preflight ignores lock holders younger than this (default 1s)")
    parser.add_argument("--json", action="store_true", help="print data as JSON")


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "migrate", help="apply pending migrations, each in its own transaction, giving up fast",
        description="Apply pending migrations from --dir. Each runs in its own transaction "
                    "with a lock_timeout and a statement_timeout; if it cannot get its locks it "
                    "is rolled back and retried with a longer lock_timeout (100 ms doubling up "
                    "to --lock-timeout) until --retries or --retry-budget run out. A preflight "
                    "first refuses if a live session would block it, and names that session.",
        epilog="exit codes: 0 applied (or nothing to do), 1 refused or failed with nothing "
               "half-applied, 2 usage error or bad migration file, 3 cannot connect")
    add_common(parser)
    parser.add_argument("--lock-timeout", type=_args.duration, default=5.0,
                        help="cap of the escalating lock_timeout per try (default 5s)")
    parser.add_argument("--first-lock-timeout", type=_args.duration, default=0.1,
                        help="lock_timeout of the first try (default 100ms)")
    parser.add_argument("--statement-timeout", type=_args.duration, default=60.0,
                        help="statement_timeout inside each migration (default 60s)")
    parser.add_argument("--index-timeout", type=_args.duration, default=3600.0,
                        help="statement_timeout for no-transaction migrations such as "
                             "CREATE INDEX CONCURRENTLY (default 1h)")
    parser.add_argument("--retries", type=_args.non_negative_int, default=10,
                        help="tries after the first, per migration (default 10)")
    parser.add_argument("--retry-budget", type=_args.duration, default=120.0,
                        help="time for all tries and waits of one migration (default 120s)")
    parser.add_argument("--runner-wait", type=_args.duration, default=10.0,
                        help="how long to wait for another runner to finish (default 10s)")
    parser.add_argument("--plan", action="store_true",
                        help="list pending migrations with each statement's lock and tables; "
                             "apply nothing")
    parser.add_argument("--no-preflight", action="store_true",
                        help="skip the check for sessions that would block the migrations")
    parser.set_defaults(run=run)


def dsn_of(args: argparse.Namespace) -> str:
    return str(args.dsn or os.environ.get("PGSTEADY_DSN", ""))


def policy_of(args: argparse.Namespace) -> apply.Policy:
    return apply.Policy(
        lock_timeout=getattr(args, "lock_timeout", 5.0),
        first_lock_timeout=getattr(args, "first_lock_timeout", 0.1),
        statement_timeout=getattr(args, "statement_timeout", 60.0),
        index_statement_timeout=getattr(args, "index_timeout", 3600.0),
        retries=getattr(args, "retries", 10),
        retry_budget=getattr(args, "retry_budget", 120.0),
        runner_wait=getattr(args, "runner_wait", 10.0),
        blocker_age=args.blocker_age,
    )


def plan_data(pending: list[Migration]) -> list[dict[str, Any]]:
    return [{
        "version": m.version, "name": m.name, "file": str(m.path),
        "transactional": m.transactional,
        "statements": [{
            "line": s.line, "col": s.col, "kind": s.kind, "sql": s.sql,
            "targets": [{"schema": t.schema, "name": t.name, "lock": str(t.lock)}
                        for t in s.targets if t.reach == Reach.SELF],
            "also": [{"schema": t.schema, "name": t.name, "lock": str(t.lock),
                      "reach": str(t.reach), "only": t.only, "description": t.describe()}
                     for t in s.targets if t.reach != Reach.SELF],
        } for s in m.statements],
    } for m in pending]


def print_plan(pending: list[Migration]) -> None:
    out = sys.stdout
    if not pending:
        print("nothing pending; the database is up to date", file=out)
        return
    print(f"{len(pending)} pending migration(s); nothing applied (--plan):", file=out)
    for m in pending:
        how = "one transaction" if m.transactional else "no transaction"
        print(f"{m.path}  ({how})", file=out)
        for s in m.statements:
            # Partitions and view expansions are where most reads go: said only in --json.
            shown = [t.describe() for t in s.targets
                     if t.reach not in (Reach.READS, Reach.DESCENDANTS)]
            locks = ", ".join(shown) or ("what it locks cannot be known from its text"
                                         if s.opaque else "no table lock")
            print(f"  line {s.line}: {s.kind}: {locks}", file=out)


def run(args: argparse.Namespace) -> int:
    migrations = source.load_dir(args.dir)  # every file checked before anything runs
    policy = policy_of(args)
    dsn = dsn_of(args)
    if args.plan:
        pending = apply.plan(dsn, migrations, policy)
        if args.json:
            print(json.dumps({"schema_version": SCHEMA_VERSION, "plan": plan_data(pending)},
                             indent=2))
        else:
            print_plan(pending)
        return EXIT_OK

    applied: list[apply.Applied] = []

    def report(done: apply.Applied) -> None:
        applied.append(done)
        if not args.json:
            print(f"applied {done.version} {done.name} in {done.seconds * 1000:.0f} ms "
                  f"({done.tries} {'try' if done.tries == 1 else 'tries'})", flush=True)

    def as_json(error: str | None) -> str:
        return json.dumps({
            "schema_version": SCHEMA_VERSION, "error": error,
            "applied": [{"version": a.version, "name": a.name, "tries": a.tries,
                         "seconds": round(a.seconds, 3)} for a in applied]}, indent=2)

    try:
        apply.migrate(dsn, migrations, policy, check_first=not args.no_preflight,
                      on_applied=report)
    except MigrationError as exc:
        if args.json:
            print(as_json(str(exc)))
        raise
    if args.json:
        print(as_json(None))
    elif not applied:
        print("nothing to apply; the database is up to date")
    return EXIT_OK
