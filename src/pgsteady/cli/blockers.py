"""``pgsteady blockers``: the blocking tree, root blockers first; end one session on request.

``--terminate PID`` / ``--cancel PID`` take one explicit pid, never a pattern: the session is
shown first, a terminal is asked to confirm, and without one the command refuses unless
``--yes``. Afterwards it says whether the session is gone or still there.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from typing import Any

from pgsteady.cli import _args
from pgsteady.errors import EXIT_FAILURE, EXIT_OK, PgsteadyError, UsageError

SCHEMA_VERSION = 1
ENDABLE = ("client backend", "autovacuum worker")
GONE_WAIT = 3.0  # how long to watch for an ended session to leave pg_stat_activity


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "blockers", help="the blocking tree, by session label; --terminate PID asks, then ends one",
        description="Show every root blocker (a session that holds a lock others wait for and "
                    "waits for nothing itself) with its whole queue under it, and how many "
                    "sessions queue per relation. With --terminate PID or --cancel PID, show "
                    "that one session, ask for confirmation, end it (pg_terminate_backend / "
                    "pg_cancel_backend) and say whether it is gone.",
        epilog="exit codes: 0 shown (or the session was ended), 1 the session was not found or "
               "did not end, 2 usage error (or no terminal to confirm without --yes), "
               "3 cannot connect")
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: $PGSTEADY_DSN, then the PG* "
                                      "environment variables)")
    parser.add_argument("--json", action="store_true", help="print data as JSON")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--terminate", type=_args.positive_int, metavar="PID",
                        help="end this session (pg_terminate_backend): its transaction rolls "
                             "back and its connection closes")
    action.add_argument("--cancel", type=_args.positive_int, metavar="PID",
                        help="cancel this session's running statement (pg_cancel_backend)")
    parser.add_argument("--yes", action="store_true",
                        help="do not ask before --terminate / --cancel")
    parser.add_argument("--timeout", type=_args.duration, default=10.0,
                        help="give up on PostgreSQL after this long (default 10s)")
    parser.set_defaults(run=run)


def _dsn(args: argparse.Namespace) -> str:
    import os

    return str(args.dsn if args.dsn is not None else os.environ.get("PGSTEADY_DSN", ""))


def run(args: argparse.Namespace) -> int:
    from pgsteady.inspect.postgres import take_snapshot

    if args.timeout <= 0:
        raise UsageError("--timeout must be more than 0, e.g. 10s")
    snap = take_snapshot(_dsn(args), timeout=args.timeout)
    if args.terminate or args.cancel:
        return end_session(args, snap)
    if args.json:
        print(json.dumps(as_json(snap), indent=2))
    else:
        render(snap)
    return EXIT_OK


def _queued_per_relation(snap: Any) -> dict[str, int]:
    from collections import Counter

    counts: Counter[str] = Counter()
    waiting = {lock.pid: lock for lock in snap.locks if not lock.granted}
    for session in snap.sessions:
        lock = waiting.get(session.pid)
        if session.blocked_by and lock is not None:
            counts[lock.relation or lock.locktype] += 1
    return dict(counts.most_common())


def as_json(snap: Any) -> dict[str, Any]:
    chains = []
    for chain in snap.chains:
        queued = []
        for q in chain.queued:
            lock = q.waiting_for
            queued.append({**q.session.as_dict(), "blocked_by": list(q.blocked_by),
                           "depth": q.depth,
                           "lock_mode": lock.mode if lock else None,
                           "relation": lock.relation if lock else None,
                           "wait_age_s": round(lock.wait_age, 3)
                           if lock and lock.wait_age is not None else None})
        chains.append({"root": {**chain.root.as_dict(),
                                "holds": [{"mode": h.mode, "relation": h.relation}
                                          for h in chain.holds]},
                       "queued": queued, "queued_total": len(queued),
                       "queued_per_relation": chain.queued_per_relation()})
    return {"schema_version": SCHEMA_VERSION, "database": snap.database,
            "chains": chains, "queued_per_relation": _queued_per_relation(snap)}


def _line(session: Any) -> str:
    from pgsteady.inspect.findings import age_text, who

    parts = [who(session), session.state or session.backend_type]
    if session.xact_age is not None:
        parts.append(f"transaction {age_text(session.xact_age)}")
    return ", ".join(p for p in parts if p)


def _query(text: str, width: int = 100) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def render(snap: Any) -> None:
    from pgsteady.inspect.findings import age_text

    per_relation = _queued_per_relation(snap)
    total = sum(per_relation.values())
    if not snap.chains:
        print(f"no blocking: nobody in {snap.database} waits for a lock held by another session")
        return
    rels = ", ".join(f"{rel}: {n}" for rel, n in per_relation.items())
    print(f"{len(snap.chains)} root blocker(s), {total} session(s) waiting ({rels})")
    for chain in snap.chains:
        print()
        holds = "; ".join(f"holds {h.mode} on {h.relation or h.locktype}" for h in chain.holds)
        print(f"ROOT {_line(chain.root)}" + (f"; {holds}" if holds else ""))
        if chain.root.query:
            print(f"     query: {_query(chain.root.query)}")
        for q in chain.queued:
            lock = q.waiting_for
            wait = (f"waits {age_text(lock.wait_age)} for {lock.mode} on "
                    f"{lock.relation or lock.locktype}" if lock else "waits")
            indent = "  " * q.depth
            print(f"{indent}└ {_line(q.session)}; {wait}; behind "
                  f"{', '.join(map(str, q.blocked_by))}")
            if q.session.query:
                print(f"{indent}  query: {_query(q.session.query)}")
    print()
    print(f"end a root with: pgsteady blockers --terminate {snap.chains[0].root.pid} (asks first)")


def end_session(args: argparse.Namespace, snap: Any) -> int:
    """Show the one session, confirm, end it, and say what happened."""
    import psycopg

    from pgsteady.inspect import queries
    from pgsteady.inspect.postgres import connect

    pid = args.terminate or args.cancel
    verb = "terminate" if args.terminate else "cancel"
    session = next((s for s in snap.sessions if s.pid == pid), None)
    if session is None:
        raise PgsteadyError(f"no session with pid {pid} on this server (it may have ended); "
                            f"run pgsteady blockers to see the current ones")
    if session.backend_type not in ENDABLE:
        raise UsageError(f"pid {pid} is PostgreSQL's own {session.backend_type or 'process'}, "
                         f"not a session; pgsteady ends only client sessions and autovacuum "
                         f"workers")
    behind = sum(len(c.queued) for c in snap.chains if c.root.pid == pid)
    # With --json, stdout carries only the outcome document; what is about to be ended (and
    # the question) go to stderr, where a person running it still sees them.
    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout)

    def outcome(result: str, text: str, code: int, **extra: Any) -> int:
        if args.json:
            print(json.dumps({"schema_version": 1, "action": verb, "pid": pid,
                              "result": result, "session": session.as_dict(),
                              "sessions_waiting_behind": behind, **extra}, indent=2))
        else:
            print(text)
        return code

    say(f"{verb} {_line(session)}" + (f"; {behind} session(s) wait behind it" if behind
                                       else ""))
    if session.query:
        say(f"  query: {_query(session.query)}")
    if not args.yes:
        if not sys.stdin.isatty():
            raise UsageError(f"refusing to {verb} pid {pid} without a terminal to confirm on; "
                             f"add --yes to do it unattended")
        answer = input(f"{verb} pid {pid}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            return outcome("declined", "nothing done", EXIT_OK)
    deadline = time.monotonic() + args.timeout
    with connect(_dsn(args), deadline=deadline, autocommit=True) as conn:
        query = queries.TERMINATE if args.terminate else queries.CANCEL
        row = conn.execute(query, {"pid": pid}).fetchone()
        if not (row and row[0]):
            return outcome("refused", f"pid {pid}: PostgreSQL refused to {verb} it (gone "
                           f"already, or not allowed for this role)", EXIT_FAILURE)
        if args.cancel:
            return outcome("cancel_sent", f"pid {pid}: cancel sent; its running statement, if "
                           f"any, ends with an error and the session stays", EXIT_OK)
        start = time.monotonic()
        while time.monotonic() - start < GONE_WAIT:
            try:
                alive = conn.execute(queries.SESSION_ALIVE, {"pid": pid}).fetchone()
            except psycopg.Error:
                break
            if alive is not None and alive[0] == 0:
                gone = time.monotonic() - start
                return outcome("terminated", f"pid {pid}: terminated, gone after {gone:.2f}s",
                               EXIT_OK, gone_after_s=round(gone, 3))
            time.sleep(0.05)
    return outcome("still_there", f"pid {pid}: terminate sent, but the session is still there "
                   f"after {GONE_WAIT:.0f}s; run pgsteady blockers again", EXIT_FAILURE)
