"""``pgsteady blockers``: the blocking tree, root blockers first; end one session on request.

``--terminate PID`` / ``--cancel PID`` take one explicit pid, never a pattern: the session is
shown first, a terminal is asked to confirm, and without one the command refuses unless
``--yes``. A superuser session (or the command's own connection) is asked about twice
(unattended: ``--yes --yes-superuser``). The pid is ended only if it still names the session
shown, checked in the ending statement itself (:mod:`pgsteady.inspect.terminate` does the
ending; this module asks and prints). Afterwards it says whether the session is gone, still
there, or was replaced.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from typing import Any

from pgsteady.cli import _args
from pgsteady.errors import EXIT_FAILURE, EXIT_OK, UsageError

SCHEMA_VERSION = 1


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "blockers", help="the blocking tree, by session label; --terminate PID asks, then ends one",
        description="Show every root blocker (a session that holds a lock others wait for and "
                    "waits for nothing itself) with its whole queue under it, and how many "
                    "sessions queue per relation. With --terminate PID or --cancel PID, show "
                    "that one session, ask for confirmation, end it (pg_terminate_backend / "
                    "pg_cancel_backend) and say whether it is gone.",
        epilog="exit codes: 0 shown (or the session was ended), 1 the session was not found, "
               "did not end, or ended / was replaced by another session with the same pid "
               "before it could be ended (nothing is ended then), 2 usage error (or no "
               "terminal to confirm on without --yes, and --yes-superuser for a superuser "
               "session), 3 cannot connect")
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
    parser.add_argument("--yes-superuser", action="store_true",
                        help="with --yes: also end a superuser session (or this command's own "
                             "connection) without asking a second time")
    parser.add_argument("--timeout", type=_args.duration, default=10.0,
                        help="give up on PostgreSQL after this long (default 10s)")
    parser.set_defaults(run=run)


def _dsn(args: argparse.Namespace) -> str:
    return _args.dsn_from(args) or ""


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
            "chains": chains, "queued_per_relation": _queued_per_relation(snap),
            "hidden_sessions": snap.hidden_sessions}


def _hidden_note(snap: Any) -> str | None:
    """What this role cannot see, or None when it sees every session."""
    from pgsteady.inspect.findings import plural

    if not snap.hidden_sessions:
        return None
    return (f"note: user {snap.user} cannot see the state, waits or query of "
            f"{plural(snap.hidden_sessions, 'other session')} (hidden); blocking is read from "
            f"pg_locks, but grant pg_monitor (or pg_read_all_stats) to see what they run")


def _line(session: Any) -> str:
    from pgsteady.inspect.findings import age_text, who

    parts = [who(session), "state hidden" if session.hidden
             else session.state or session.backend_type]
    if session.xact_age is not None:
        parts.append(f"transaction {age_text(session.xact_age)}")
    return ", ".join(p for p in parts if p)


def _query(text: str, width: int = 100) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def render(snap: Any) -> None:
    from pgsteady.inspect.findings import age_text, plural
    from pgsteady.inspect.postgres import waiting_sessions

    per_relation = _queued_per_relation(snap)
    total = waiting_sessions(snap.sessions)
    note = _hidden_note(snap)
    if note:
        print(note)
    if not snap.chains:
        print(f"no blocking: nobody in {snap.database} waits for a lock held by another session")
        return
    rels = ", ".join(f"{rel}: {n}" for rel, n in per_relation.items())
    print(f"{plural(len(snap.chains), 'root blocker')}, {plural(total, 'session')} "
          f"waiting ({rels})")
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
    for line in advice(snap):
        print(line)


def advice(snap: Any) -> list[str]:
    """What to run next, in the runbook's order: a DDL waiting for ACCESS EXCLUSIVE with a
    queue behind it is cancelled first (the queue drains at once, the migration rolls back
    and can be retried with a lock_timeout); only then a root, if it should not be running."""
    from pgsteady.inspect.findings import plural, waiting_statement

    queues = snap.lock_queues()
    root = snap.chains[0].root.pid
    if not queues:
        return [f"end a root with: pgsteady blockers --terminate {root} (asks first)"]
    first = queues[0]
    lines = [f"first cancel the waiting {waiting_statement(first.waiter.query)} "
             f"({plural(len(first.queued), 'session')} queued behind it): pgsteady blockers "
             f"--cancel {first.waiter.pid} (asks first; it rolls back, retry it later with a "
             f"lock_timeout)"]
    if first.roots:
        lines.append(f"then, if it should not be running, end the root: pgsteady blockers "
                     f"--terminate {first.roots[0].pid} (asks first)")
    return lines


def end_session(args: argparse.Namespace, snap: Any) -> int:
    """Show the one session, confirm, end it only if its pid still names the session shown
    (see :mod:`pgsteady.inspect.terminate`), and say what happened."""
    from pgsteady.inspect import terminate
    from pgsteady.inspect.findings import plural
    from pgsteady.inspect.postgres import connect

    pid = args.terminate or args.cancel
    verb: terminate.Action = "terminate" if args.terminate else "cancel"
    deadline = time.monotonic() + args.timeout
    # With --json, stdout carries only the outcome document; what is about to be ended (and
    # the questions) go to stderr, where a person running it still sees them.
    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout)
    with connect(_dsn(args), deadline=deadline, autocommit=True) as conn:
        target = terminate.find(conn, pid)  # on the connection that will end it
        session = target.session
        behind = sum(len(c.queued) for c in snap.chains if c.root.pid == pid)

        def outcome(result: str, text: str, code: int, **extra: Any) -> int:
            if args.json:
                print(json.dumps({"schema_version": 1, "action": verb, "pid": pid,
                                  "result": result, "session": session.as_dict(),
                                  "sessions_waiting_behind": behind, **extra}, indent=2))
            else:
                print(text)
            return code

        say(f"{verb} {_line(session)}" + (f"; {plural(behind, 'session')} wait behind it"
                                           if behind else ""))
        if session.query and not session.hidden:
            say(f"  query: {_query(session.query)}")
        if target.hidden_note:
            say(target.hidden_note)
        warning = ("it is this command's own connection" if target.own else
                   f"it is a superuser session (user {session.user})" if session.superuser
                   else None)
        if not confirm(args, verb, pid, warning, say):
            return outcome("declined", "nothing done", EXIT_OK)
        done = terminate.end(conn, target, verb)
    return outcome(done.result, done.text, EXIT_OK if done.ok else EXIT_FAILURE, **done.extra)


def confirm(args: argparse.Namespace, verb: str, pid: int, warning: str | None,
            say: Any) -> bool:
    """Ask before ending a session, and ask again when ``warning`` (a superuser session, or
    this command's own). ``--yes`` answers the first question and ``--yes-superuser`` the
    second; an unanswered one is asked on a terminal, else refused (exit 2)."""
    questions = [(args.yes, f"{verb} pid {pid}? [y/N] ", "--yes")]
    if warning is not None:
        say(f"warning: {warning}")
        questions.append((args.yes_superuser, f"{warning}: {verb} pid {pid} anyway? [y/N] ",
                          "--yes-superuser"))
    for answered, question, _flag in questions:
        if answered:
            continue
        if not sys.stdin.isatty():
            need = " and ".join(f for a, _, f in questions if not a)
            raise UsageError(f"refusing to {verb} pid {pid}" + (f" ({warning})" if warning
                                                                  else "")
                             + f" without a terminal to confirm on; add {need} to do it "
                             f"unattended")
        if input(question).strip().lower() not in ("y", "yes"):
            return False
    return True
