"""``pgsteady migrate``: apply pending migrations that give up fast and leave nothing behind."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from pgsteady.cli import _args, _renamed
from pgsteady.errors import EXIT_FAILURE, EXIT_OK, BadMigration, MigrationError
from pgsteady.migrate import apply, history, preflight, repair, source, status
from pgsteady.migrate.source import Migration
from pgsteady.sql.locks import Reach
from pgsteady.tools import registry

if TYPE_CHECKING:
    from pgsteady.sql.opaque import Reading
    from pgsteady.sql.statement import StatementInfo

SCHEMA_VERSION = 1
# Layouts whose versions are whole numbers in their history; others are text (1.2, names).


def add_common(parser: argparse.ArgumentParser) -> None:
    """Options ``migrate`` and ``preflight`` share."""
    parser.add_argument("--dsn", help="libpq DSN or URL (default: $PGSTEADY_DSN, then the "
                                      "PG* environment variables)")
    parser.add_argument("--dir", default="migrations",
                        help="folder of <version>_<name>.sql files (default: migrations)")
    parser.add_argument("--tool", choices=("auto", *registry.NAMES), default="auto",
                        help="whose folder layout and history table: pgsteady's or another "
                             "tool's (default: auto, detected from the files)")
    _renamed.add_alias(parser, "--layout", "--tool", "tool", choices=("auto", *registry.NAMES))
    parser.add_argument("--history-table", default="", metavar="SCHEMA.NAME",
                        help="the history table (default: the layout's own, in public, e.g. "
                             "public.pgsteady_migrations); a role that cannot create in "
                             "public passes its own schema")
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
        epilog="exit codes: 0 applied (or nothing to do), 1 refused, stopped or failed: "
               "every migration is applied whole or not at all, except the steps of a "
               "no-transaction file, which the message then names; 2 usage error or bad "
               "migration file, 3 cannot connect")
    add_common(parser)
    parser.add_argument("--lock-timeout", type=_args.duration, default=5.0,
                        help="cap of the escalating lock_timeout per try (default 5s)")
    parser.add_argument("--first-lock-timeout", type=_args.duration, default=0.1,
                        help="lock_timeout of the first try (default 100ms)")
    parser.add_argument("--statement-timeout", type=_args.duration, default=60.0,
                        help="statement_timeout inside each migration (default 60s)")
    parser.add_argument("--index-timeout", type=_args.duration, default=3600.0,
                        help="statement_timeout for no-transaction migrations such as "
                             "CREATE INDEX CONCURRENTLY (default 60m)")
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
    parser.add_argument("--status", action="store_true",
                        help="list every version: applied, pending, changed, missing, "
                             "unfinished, out-of-order; apply nothing (exit 1 if the folder "
                             "and the history disagree)")
    parser.add_argument("--accept", action="append", default=[], metavar="VERSION",
                        help="accept an intended disagreement (as Flyway's repair): record an "
                             "edited or renamed file as it is now, forget a version whose file "
                             "is gone, record an unfinished one as applied; repeatable; "
                             "applies nothing else")
    parser.add_argument("--allow-out-of-order", action="store_true",
                        help="apply pending versions older than the newest applied one")
    parser.add_argument("--baseline", metavar="VERSION",
                        help="adopt an existing database: record every migration up to "
                             "VERSION as applied without running it, then apply the rest")
    parser.add_argument("--metrics-file", metavar="PATH",
                        help="write the run's outcome for node_exporter's textfile collector "
                             "(pgsteady_migration_last_run_*), atomically, on success and on "
                             "failure")
    parser.set_defaults(run=run)


def dsn_of(args: argparse.Namespace) -> str:
    """``--dsn``, else ``PGSTEADY_DSN``, else ``""``: libpq's PG* variables."""
    return _args.dsn_from(args) or ""


def policy_of(args: argparse.Namespace) -> apply.Policy:
    schema, table = "public", ""
    if args.history_table:
        schema, table = history.parse_table(args.history_table)
    return apply.Policy(
        lock_timeout=getattr(args, "lock_timeout", 5.0),
        first_lock_timeout=getattr(args, "first_lock_timeout", 0.1),
        statement_timeout=getattr(args, "statement_timeout", 60.0),
        index_statement_timeout=getattr(args, "index_timeout", 3600.0),
        retries=getattr(args, "retries", 10),
        retry_budget=getattr(args, "retry_budget", 120.0),
        runner_wait=getattr(args, "runner_wait", 10.0),
        blocker_age=args.blocker_age,
        history_schema=schema,
        history_table=table,
        allow_out_of_order=getattr(args, "allow_out_of_order", False),
    )


def plan_data(pending: list[Migration]) -> list[dict[str, Any]]:
    return [{
        "version": m.version if registry.get(m.tool).numeric else m.tag, "name": m.name,
        "file": str(m.path), "transactional": m.transactional,
        "statements": [_statement_data(s, reading)
                       for s, reading in preflight.read_statements(m)],
    } for m in pending]


def _statement_data(s: StatementInfo, reading: Reading | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "line": s.line, "col": s.col, "kind": s.kind, "sql": s.sql,
        "targets": [{"schema": t.schema, "name": t.name, "lock": str(t.lock)}
                    for t in s.targets if t.reach == Reach.SELF],
        "also": [{"schema": t.schema, "name": t.name, "lock": str(t.lock),
                  "reach": str(t.reach), "only": t.only, "description": t.describe()}
                 for t in s.targets if t.reach != Reach.SELF],
    }
    if reading is not None:  # a DO block read as preflight reads it
        data["inner"] = [_statement_data(inner, None) for inner in reading.statements]
        data["unknown"] = [{"line": line, "why": why} for line, why in reading.unknown]
    return data


def print_plan(pending: list[Migration]) -> None:
    out = sys.stdout
    if not pending:
        print("nothing pending; the database is up to date", file=out)
        return
    print(f"{len(pending)} pending migration(s); nothing applied (--plan):", file=out)
    for m in pending:
        how = "one transaction" if m.transactional else "no transaction"
        if m.elsewhere is not None:
            how = f"{m.elsewhere}: migrate stops before it"
        print(f"{m.path}  ({how})", file=out)
        for s, reading in preflight.read_statements(m):
            if reading is not None:  # a DO block: its statements, read as preflight reads them
                for inner in reading.statements:
                    print(f"  line {inner.line}: {inner.kind}: {_locks(inner)}", file=out)
                for line, why in reading.unknown:
                    print(f"  line {line}: {s.kind}: cannot be known: {why}", file=out)
                if not reading.statements and not reading.unknown:
                    print(f"  line {s.line}: {s.kind}: no table lock", file=out)
                continue
            print(f"  line {s.line}: {s.kind}: {_locks(s)}", file=out)


def _locks(s: StatementInfo) -> str:
    # Partitions and view expansions are where most reads go: said only in --json.
    shown = [t.describe() for t in s.targets if t.reach not in (Reach.READS, Reach.DESCENDANTS)]
    return ", ".join(shown) or ("what it locks cannot be known from its text" if s.opaque
                                else "no table lock")


def print_status(entries: list[status.Entry], where: str) -> None:
    out = sys.stdout
    width = max((len(e.tag) for e in entries), default=7)
    print(f"{len(entries)} version(s) in the folder and {where}:", file=out)
    for e in entries:
        name = e.migration.label if e.migration is not None else (e.row.name if e.row else "")
        print(f"  {e.tag:<{width}}  {e.state:<12}  {name or ''}"
              + (f"  ({e.detail})" if e.detail else ""), file=out)
    wrong = status.disagreements(entries)
    if wrong:
        print(f"{len(wrong)} disagreement(s): fix the folder, or accept each intended one with "
              f"pgsteady migrate --accept VERSION", file=out)


def run_status(args: argparse.Namespace, migrations: list[Migration],
               policy: apply.Policy) -> int:
    with apply.connect(dsn_of(args)) as conn:
        apply.refuse_transaction_pooler(conn, dsn_of(args))
        apply.backstop(conn, policy)
        entries = apply.states(conn, migrations, policy)
    where = apply.store_of(policy, migrations).qualified
    if args.json:
        print(json.dumps({"schema_version": SCHEMA_VERSION, "history_table": where,
                          "ok": not status.disagreements(entries),
                          "versions": [e.as_dict() for e in entries]}, indent=2))
    else:
        print_status(entries, where)
    return EXIT_FAILURE if status.disagreements(entries) else EXIT_OK


def run(args: argparse.Namespace) -> int:
    # Only a run that applies migrations reports its outcome (not --plan, --status, --accept).
    metrics_file = None if (args.plan or args.status or args.accept) \
        else getattr(args, "metrics_file", None)
    if metrics_file is None:
        return _run(args, [])
    from pgsteady.migrate import textfile

    textfile.check_path(metrics_file)
    started = time.monotonic()
    applied: list[apply.Applied] = []
    failure: BaseException | None = None
    try:
        return _run(args, applied)
    except BaseException as exc:
        failure = exc
        raise
    finally:
        # Count what is left only when the database answered (a refused or failed migration).
        reached = isinstance(failure, MigrationError) and not isinstance(failure, BadMigration)
        pending = 0 if failure is None else _pending_or_none(args) if reached else None
        textfile.write_run(metrics_file, success=failure is None,
                           seconds=time.monotonic() - started,
                           tries=sum(a.tries for a in applied), applied=len(applied),
                           pending=pending)


def _pending_or_none(args: argparse.Namespace) -> int | None:
    """After a failure: how many migrations are still pending (None when that is unknown)."""
    try:
        return len(apply.plan(dsn_of(args), source.load_dir(args.dir, args.tool),
                              policy_of(args)))
    except Exception:  # the run already failed; its own error is what gets reported
        return None


def _run(args: argparse.Namespace, applied: list[apply.Applied]) -> int:
    policy = policy_of(args)
    dsn = dsn_of(args)
    # a run that applies connects while every file is checked (before anything runs)
    early = None if (args.status or args.accept or args.plan) else apply.EarlyConnection(dsn)
    try:
        migrations = source.load_dir(args.dir, args.tool)
    except BaseException:
        if early is not None:
            early.discard()
        raise
    if args.status:
        return run_status(args, migrations, policy)
    if args.accept:
        accepted = repair.accept(dsn, migrations, args.accept, policy)
        if args.json:
            print(json.dumps({"schema_version": SCHEMA_VERSION,
                              "accepted": [e.as_dict() for e in accepted]}, indent=2))
        else:
            for entry in accepted:
                print(f"accepted {entry.describe()}")
        return EXIT_OK
    if args.plan:
        pending = apply.plan(dsn, migrations, policy)
        if args.json:
            print(json.dumps({"schema_version": SCHEMA_VERSION, "plan": plan_data(pending)},
                             indent=2))
        else:
            print_plan(pending)
        return EXIT_OK

    numeric = not migrations or registry.get(migrations[0].tool).numeric

    def shown(done: apply.Applied) -> int | str:
        """The version as --plan and preflight show it: the tool's own where not a number."""
        return done.version if numeric or not done.tag else done.tag

    def report(done: apply.Applied) -> None:
        applied.append(done)
        if not args.json:
            print(f"applied {shown(done)} {done.name} in {done.seconds * 1000:.0f} ms "
                  f"({done.tries} {'try' if done.tries == 1 else 'tries'})", flush=True)

    def as_json(error: str | None) -> str:
        return json.dumps({
            "schema_version": SCHEMA_VERSION, "error": error,
            "applied": [{"version": shown(a), "name": a.name, "tries": a.tries,
                         "seconds": round(a.seconds, 3)} for a in applied]}, indent=2)

    try:
        apply.migrate(dsn, migrations, policy, check_first=not args.no_preflight,
                      on_applied=report, baseline_tag=args.baseline, early=early)
    except MigrationError as exc:
        if args.json:
            print(as_json(str(exc)))
        raise
    if args.json:
        print(as_json(None))
    elif not applied:
        print("nothing to apply; the database is up to date")
    return EXIT_OK
