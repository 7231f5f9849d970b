"""blockers --terminate on real PostgreSQL when the pid changes hands, and the second question
for superuser sessions and the command's own connection (issue 27, item 4)."""

from __future__ import annotations

import sys
import time

import psycopg
import pytest

from pgsteady.cli import main
from pgsteady.inspect import postgres, queries


def _alive(dsn: str, pid: int) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                           (pid,)).fetchone()
    return row == (1,)


@pytest.fixture
def answers(monkeypatch):
    """A terminal on stdin whose answers the test gives; records the questions asked."""
    asked: list[str] = []
    replies: list[str] = []
    hooks: list = []

    def ask(question: str = "") -> str:
        asked.append(question)
        for hook in hooks:
            hook()
        return replies.pop(0)

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", ask)
    return asked, replies, hooks


def test_a_session_gone_while_asking_is_not_ended(pgsteady_database, answers, capsys):
    """The session shown ends while the question waits: nothing is ended, the command says
    so and exits 1."""
    dsn = pgsteady_database.dsn
    victim = psycopg.connect(dsn, autocommit=True, application_name="victim@box:1")
    pid = victim.info.backend_pid
    _asked, replies, hooks = answers
    replies += ["y", "y"]

    def leave() -> None:
        if not victim.closed:
            victim.close()
            deadline = time.monotonic() + 10
            while _alive(dsn, pid) and time.monotonic() < deadline:
                time.sleep(0.05)

    hooks.append(leave)
    assert main(["blockers", "--dsn", dsn, "--terminate", str(pid)]) == 1
    assert f"pid {pid} has ended already; nothing ended" in capsys.readouterr().out


def test_a_replaced_session_is_not_ended(pgsteady_database, monkeypatch, capsys):
    """When the ending statement sees another backend_start for the pid (a new session
    given the same pid), the session is not ended: 'is now another session', exit 1."""
    dsn = pgsteady_database.dsn
    victim = psycopg.connect(dsn, autocommit=True, application_name="victim@box:2")
    pid = victim.info.backend_pid
    # The pid's session as the ending statement sees it started a second after the one shown.
    monkeypatch.setattr(queries, "TERMINATE", queries.TERMINATE.replace(
        "backend_start = ", "backend_start - interval '1 second' = "))
    try:
        code = main(["blockers", "--dsn", dsn, "--terminate", str(pid), "--yes",
                     "--yes-superuser"])
        out = capsys.readouterr().out
        assert code == 1
        assert f"pid {pid} is now another session (started " in out
        assert "nothing ended" in out
        assert _alive(dsn, pid)
        victim.execute("SELECT 1")  # still connected
    finally:
        victim.close()


def test_the_guarded_statement_ends_only_the_same_session(pgsteady_database):
    """TERMINATE with the shown backend_start ends the session; with any other (or another
    user) it returns no row and the session stays."""
    dsn = pgsteady_database.dsn
    with psycopg.connect(dsn, autocommit=True) as victim, \
            psycopg.connect(dsn, autocommit=True) as conn:
        pid = victim.info.backend_pid
        start, user = conn.execute("SELECT backend_start, usename::text FROM pg_stat_activity "
                                   "WHERE pid = %s", (pid,)).fetchone()
        later = conn.execute("SELECT %s::timestamptz + interval '1 ms'", (start,)).fetchone()[0]
        for other in ({"backend_start": later, "usename": user},
                      {"backend_start": start, "usename": "someone_else"}):
            assert conn.execute(queries.TERMINATE, {"pid": pid, **other}).fetchone() is None
            assert _alive(dsn, pid)
        same = {"pid": pid, "backend_start": start, "usename": user}
        assert conn.execute(queries.TERMINATE, same).fetchone() == (True,)


def test_a_superuser_session_is_asked_about_twice(pgsteady_database, answers, capsys):
    """A superuser's session: a warning, then two questions; 'n' to the second leaves it,
    'y' to both ends it."""
    dsn = pgsteady_database.dsn
    victim = psycopg.connect(dsn, autocommit=True, application_name="admin@laptop:1")
    pid = victim.info.backend_pid
    asked, replies, _ = answers
    try:
        replies += ["y", "n"]
        assert main(["blockers", "--dsn", dsn, "--terminate", str(pid)]) == 0
        out = capsys.readouterr().out
        assert "warning: it is a superuser session" in out and "nothing done" in out
        assert len(asked) == 2 and "anyway?" in asked[1]
        assert _alive(dsn, pid)

        asked.clear()
        replies += ["y", "y"]
        assert main(["blockers", "--dsn", dsn, "--terminate", str(pid)]) == 0
        assert f"pid {pid}: terminated, gone" in capsys.readouterr().out
        assert len(asked) == 2
    finally:
        victim.close()


def test_unattended_superuser_needs_the_explicit_flag(pgsteady_database, capsys):
    """Without a terminal, --yes alone refuses a superuser's session (exit 2, naming
    --yes-superuser) and leaves it; so does --cancel."""
    dsn = pgsteady_database.dsn
    with psycopg.connect(dsn, autocommit=True) as victim:
        pid = victim.info.backend_pid
        for verb in ("--terminate", "--cancel"):
            assert main(["blockers", "--dsn", dsn, verb, str(pid), "--yes"]) == 2
            err = capsys.readouterr().err
            assert "superuser session" in err and "--yes-superuser" in err
        assert _alive(dsn, pid)


def test_the_commands_own_connection_is_asked_about_twice(pgsteady_database, answers,
                                                          monkeypatch, capsys):
    """A pid that is the connection blockers ends sessions with (pg_backend_pid()): warned,
    asked twice, and 'y' to both ends it and says so."""
    dsn = pgsteady_database.dsn
    real_connect = postgres.connect
    own = real_connect(dsn, deadline=time.monotonic() + 10, autocommit=True)
    pid = own.info.backend_pid
    # blockers' ending connection is this one, whose pid the test knows in advance.
    monkeypatch.setattr(postgres, "connect", lambda d, **kw: own if kw.get("autocommit")
                        else real_connect(d, **kw))
    asked, replies, _ = answers
    replies += ["y", "y"]
    try:
        assert main(["blockers", "--dsn", dsn, "--terminate", str(pid)]) == 0
        out = capsys.readouterr().out
        assert "warning: it is this command's own connection" in out
        assert len(asked) == 2
        assert f"pid {pid}: ended this command's own connection" in out
        assert not _alive(dsn, pid)
    finally:
        own.close()


def test_cancel_on_an_idle_in_transaction_session_says_it_frees_nothing(pgsteady_database,
                                                                        capsys):
    """--cancel on a session idle in transaction holding a lock: says there is no query to
    cancel and no lock freed, points at --terminate; the lock is indeed still held."""
    dsn = pgsteady_database.dsn
    with psycopg.connect(dsn) as holder, psycopg.connect(dsn, autocommit=True) as probe:
        holder.execute("CREATE TABLE held (id int)")
        holder.commit()
        holder.execute("LOCK TABLE held IN ACCESS EXCLUSIVE MODE")  # then idle in transaction
        pid = holder.info.backend_pid
        argv = ["blockers", "--dsn", dsn, "--cancel", str(pid), "--yes", "--yes-superuser"]
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "idle in transaction" in out and "no query to cancel" in out
        assert "frees no lock" in out and f"--terminate {pid}" in out
        held = probe.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND granted AND "
                             "mode = 'AccessExclusiveLock'", (pid,)).fetchone()
        assert held is not None and held[0] >= 1
        assert main([*argv, "--json"]) == 0
        assert '"frees_nothing": true' in capsys.readouterr().out
