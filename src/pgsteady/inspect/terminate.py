"""Ending one session on an operator's explicit request (``pgsteady blockers --terminate`` /
``--cancel``): the pid given, nothing else, and only if it still names the session shown.

Pids are reused, and the operator's confirmation may wait any time, so the session is read on
the connection that will end it and compared again inside the ending statement itself:

- a session this role sees whole (its own role's, or any with ``pg_read_all_stats`` /
  ``pg_monitor``): same ``backend_start`` and user;
- another role's session seen by a role without ``pg_read_all_stats`` (``pg_signal_backend``
  alone: the usual on-call grant): PostgreSQL hides its start time, state and query, but every
  role sees ``pg_locks``. The session's transaction there (``virtualtransaction``: its backend
  slot and a counter a later session in that slot does not repeat), its user and its database
  name it. A session in no transaction has no such name; it also holds no lock, so ending it
  frees nothing: refused, saying what a role with ``pg_read_all_stats`` could do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

import psycopg
from psycopg.rows import dict_row

from pgsteady.errors import PgsteadyError, UsageError
from pgsteady.inspect import queries
from pgsteady.inspect.postgres import QUERY_CHARS, Session, _session
from pgsteady.settings import describe

Action = Literal["terminate", "cancel"]
ENDABLE = ("client backend", "autovacuum worker")
GONE_WAIT = 3.0
"""How long to watch for a terminated session to leave pg_stat_activity."""


@dataclass(frozen=True)
class Target:
    """The session an operator is about to end, as this role sees it."""

    session: Session
    own: bool  # the connection that will end it
    transaction: str | None = None  # pg_locks' name for a hidden session's transaction

    @property
    def hidden_note(self) -> str | None:
        """For a session this role cannot look into: what it cannot see, and what is checked
        instead before ending it."""
        if not self.session.hidden:
            return None
        s = self.session
        return (f"note: this role cannot see pid {s.pid}'s state, query or start time (it "
                f"lacks pg_read_all_stats); it is ended only if the pid is still user "
                f"{s.user}'s session in database {s.database or '-'} in the same transaction "
                f"({self.transaction}), as pg_locks shows to every role")


@dataclass(frozen=True)
class Outcome:
    """What happened: ``result`` is one of terminated, cancel_sent, gone, changed, refused,
    still_there; ``text`` the operator's line; ``extra`` more fields for --json."""

    result: str
    text: str
    ok: bool
    extra: dict[str, Any] = field(default_factory=dict)


def find(conn: psycopg.Connection[Any], pid: int) -> Target:
    """The session ``pid`` names now, read on ``conn`` (the connection that will end it);
    PgsteadyError if there is none or it cannot be told from a later one, UsageError if it is
    not a session pgsteady ends."""
    row = conn.cursor(row_factory=dict_row).execute(
        queries.SESSION, {"pid": pid, "query_chars": QUERY_CHARS}).fetchone()
    if row is None:
        raise PgsteadyError(f"no session with pid {pid} on this server (it may have ended); "
                            f"run pgsteady blockers to see the current ones")
    session = _session(row)
    own = pid == conn.info.backend_pid
    if session.hidden:
        return Target(session, own, _hidden_transaction(conn, session))
    if session.backend_type not in ENDABLE:
        raise UsageError(f"pid {pid} is PostgreSQL's own {session.backend_type or 'process'}, "
                         f"not a session; pgsteady ends only client sessions and autovacuum "
                         f"workers")
    return Target(session, own)


def _hidden_transaction(conn: psycopg.Connection[Any], session: Session) -> str:
    pid = session.pid
    if not session.usename:  # no user: PostgreSQL's own process (or one it hides whole)
        raise UsageError(f"pid {pid} has no user: PostgreSQL's own process, which this role "
                         f"cannot look into (it lacks pg_read_all_stats); pgsteady ends only "
                         f"client sessions and autovacuum workers")
    row = conn.execute(queries.TRANSACTION_OF, {"pid": pid}).fetchone()
    if row is None or not row[0]:
        raise PgsteadyError(
            f"pid {pid} is user {session.user}'s session, which this role cannot look into (it "
            f"lacks pg_read_all_stats): without its start time it cannot be told from a later "
            f"session given the same pid, and it is in no transaction, so it holds no lock and "
            f"ending it frees nothing; nothing ended. To end it anyway, run as a role with "
            f"pg_monitor (or pg_read_all_stats) and pg_signal_backend")
    return str(row[0])


def end(conn: psycopg.Connection[Any], target: Target, action: Action, *,
        gone_wait: float = GONE_WAIT) -> Outcome:
    """End ``target`` if its pid still names it (checked in the ending statement), and say
    what happened; a terminated session is watched for up to ``gone_wait`` seconds."""
    session, pid = target.session, target.session.pid
    if target.transaction is not None:
        query = queries.TERMINATE_HIDDEN if action == "terminate" else queries.CANCEL_HIDDEN
        same: dict[str, Any] = {"pid": pid, "usename": session.usename,
                                "database": session.database,
                                "transaction": target.transaction}
    else:
        query = queries.TERMINATE if action == "terminate" else queries.CANCEL
        same = {"pid": pid, "backend_start": session.backend_start,
                "usename": session.usename}
    try:
        ended = conn.execute(query, same).fetchone()
    except (psycopg.errors.AdminShutdown, psycopg.errors.QueryCanceled):
        if not target.own:
            raise
        return Outcome("terminated" if action == "terminate" else "cancel_sent",
                       f"pid {pid}: ended this command's own connection", True)
    except psycopg.errors.InsufficientPrivilege as exc:  # a superuser's session, say
        return Outcome("refused", f"pid {pid}: PostgreSQL refused to {action} it: "
                       f"{describe(exc)}", False)
    except psycopg.OperationalError as exc:
        raise PgsteadyError(f"lost the connection to PostgreSQL while asking ({exc}); pid "
                            f"{pid} was not ended; run the command again") from exc
    if ended is None:  # the pid is gone, or names another session (or transaction) now
        return _not_the_same(conn, target)
    if not ended[0]:
        return Outcome("refused", f"pid {pid}: PostgreSQL refused to {action} it (not allowed "
                       f"for this role, or gone at that instant)", False)
    if action == "cancel":
        return _cancelled(session)
    start = time.monotonic()
    while time.monotonic() - start < gone_wait:
        try:
            alive = conn.execute(queries.SESSION_ALIVE, {"pid": pid}).fetchone()
        except psycopg.Error:
            break
        if alive is not None and alive[0] == 0:
            gone = time.monotonic() - start
            return Outcome("terminated", f"pid {pid}: terminated, gone after {gone:.2f}s",
                           True, {"gone_after_s": round(gone, 3)})
        time.sleep(0.05)
    return Outcome("still_there", f"pid {pid}: terminate sent, but the session is still there "
                   f"after {gone_wait:.0f}s; run pgsteady blockers again", False)


def _not_the_same(conn: psycopg.Connection[Any], target: Target) -> Outcome:
    pid = target.session.pid
    now = conn.cursor(row_factory=dict_row).execute(
        queries.SESSION, {"pid": pid, "query_chars": QUERY_CHARS}).fetchone()
    if now is None:
        return Outcome("gone", f"pid {pid} has ended already; nothing ended", False)
    other = _session(now)
    if target.transaction is not None:
        return Outcome("changed", f"pid {pid} is no longer in the transaction shown (it ended "
                       f"it, or the pid is another session now); nothing ended; run pgsteady "
                       f"blockers again", False, {"now": other.as_dict()})
    started = other.backend_start.isoformat(" ", "seconds") if other.backend_start else "?"
    return Outcome("changed", f"pid {pid} is now another session (started {started}, user "
                   f"{other.user or '-'}); nothing ended", False,
                   {"now": {**other.as_dict(), "backend_start": started}})


def _cancelled(session: Session) -> Outcome:
    pid = session.pid
    if session.state.startswith("idle"):
        # pg_cancel_backend ends a running statement only: an idle session's transaction (and
        # every lock it holds) outlives the cancel.
        what = "idle in transaction" if "transaction" in session.state else "idle"
        return Outcome("cancel_sent", f"pid {pid}: cancel sent, but the session is {what}: it "
                       f"has no query to cancel, and cancelling frees no lock it holds; to end "
                       f"its transaction use --terminate {pid}", True,
                       {"state": session.state, "frees_nothing": True})
    return Outcome("cancel_sent", f"pid {pid}: cancel sent; its running statement, if any, "
                   f"ends with an error and the session stays", True)
