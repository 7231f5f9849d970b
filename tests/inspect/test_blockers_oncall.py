"""blockers --terminate / --cancel run by the on-call role the docs describe: it may signal
backends (pg_signal_backend) but not read other roles' activity (no pg_read_all_stats), so
PostgreSQL hides the sessions' state, query and start time. It is told what it cannot see,
and still ends the session shown, and only that one: the pid is re-checked against the
session's user, database and transaction as pg_locks shows them to every role."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgsteady.cli import main
from pgsteady.inspect import queries


def _as(dsn: str, user: str, password: str) -> str:
    params = conninfo_to_dict(dsn)
    params.pop("passfile", None)
    return make_conninfo("", **{**params, "user": user, "password": password})


def _alive(dsn: str, pid: int) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                           (pid,)).fetchone()
    return row == (1,)


def _wait_for(dsn: str, sql: str, params: tuple = ()) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(200):
            if conn.execute(sql, params).fetchone():
                return
            time.sleep(0.05)
    pytest.fail(f"never true: {sql}")


@pytest.fixture
def roles(pgsteady_database):
    """(superuser DSN, the application role's DSN, the on-call role's DSN): app owns table
    queued; oncall has pg_signal_backend and nothing else."""
    dsn = pgsteady_database.dsn
    suffix = uuid.uuid4().hex[:8]
    app, oncall = f"app_{suffix}", f"oncall_{suffix}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {app} LOGIN PASSWORD 'app-pw'")
        admin.execute(f"CREATE ROLE {oncall} LOGIN PASSWORD 'oncall-pw'")
        admin.execute(f"GRANT pg_signal_backend TO {oncall}")
        admin.execute("CREATE TABLE queued (id int)")
        admin.execute(f"ALTER TABLE queued OWNER TO {app}")
    try:
        yield dsn, _as(dsn, app, "app-pw"), _as(dsn, oncall, "oncall-pw")
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE usename IN (%s, %s)", (app, oncall))
            admin.execute("DROP TABLE IF EXISTS queued")
            for role in (app, oncall):
                for _ in range(100):  # its sessions leave first
                    with contextlib.suppress(psycopg.errors.DependentObjectsStillExist):
                        admin.execute(f"DROP ROLE {role}")
                        break
                    time.sleep(0.05)


@pytest.fixture
def queue(roles):
    """A lock queue of the application role's sessions: holder idle in transaction, an ALTER
    waiting for ACCESS EXCLUSIVE, a read behind it. Yields (dsns, holder pid, alter pid,
    the ALTER's outcome list, the reader's outcome list)."""
    admin, app, _oncall = roles
    holder = psycopg.connect(app, application_name="report")
    holder.execute("SELECT * FROM queued")  # idle in transaction, holding ACCESS SHARE
    alter = psycopg.connect(app, autocommit=True, application_name="migrate")
    reader = psycopg.connect(app, autocommit=True, application_name="api")
    outcomes: dict[str, list[str]] = {"alter": [], "reader": []}

    def run(conn: psycopg.Connection, sql: str, into: list[str]) -> None:
        try:
            conn.execute(sql)
            into.append("done")
        except psycopg.Error as exc:
            into.append(type(exc).__name__)

    threads = [threading.Thread(target=run, args=(alter, "ALTER TABLE queued ADD x int",
                                                  outcomes["alter"]), daemon=True)]
    threads[0].start()
    _wait_for(admin, "SELECT 1 FROM pg_locks WHERE NOT granted AND pid = %s",
              (alter.info.backend_pid,))
    threads.append(threading.Thread(target=run, args=(reader, "SELECT count(*) FROM queued",
                                                      outcomes["reader"]), daemon=True))
    threads[1].start()
    _wait_for(admin, "SELECT 1 FROM pg_locks WHERE NOT granted AND pid = %s",
              (reader.info.backend_pid,))
    try:
        yield roles, holder.info.backend_pid, alter.info.backend_pid, outcomes
    finally:
        holder.close()
        for conn in (alter, reader):
            with contextlib.suppress(psycopg.Error):
                conn.cancel_safe()
        for thread in threads:
            thread.join(10)
        alter.close()
        reader.close()


def test_oncall_role_cancels_the_waiting_alter_it_cannot_see(queue, capsys):
    """--cancel on the waiting ALTER: told what it cannot see, the ALTER is cancelled, the
    read queued behind it runs, exit 0 (before: 'PostgreSQL's own process', exit 2)."""
    (_admin, _app, oncall), _holder, alter, outcomes = queue
    assert main(["blockers", "--dsn", oncall, "--cancel", str(alter), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "PostgreSQL's own" not in out
    assert f"cannot see pid {alter}'s state, query or start time" in out
    assert "pg_read_all_stats" in out
    assert f"pid {alter}: cancel sent" in out
    for _ in range(200):
        if outcomes["alter"] and outcomes["reader"]:
            break
        time.sleep(0.05)
    assert outcomes == {"alter": ["QueryCanceled"], "reader": ["done"]}


def test_oncall_role_terminates_the_root_it_cannot_see(queue, capsys):
    """--terminate on the root blocker (idle in transaction): ended, gone, exit 0; the queue
    behind it drains."""
    (admin, _app, oncall), holder, _alter, outcomes = queue
    assert main(["blockers", "--dsn", oncall, "--terminate", str(holder), "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"pid {holder}: terminated, gone after" in out
    assert not _alive(admin, holder)
    for _ in range(200):
        if outcomes["alter"] and outcomes["reader"]:
            break
        time.sleep(0.05)
    assert outcomes == {"alter": ["done"], "reader": ["done"]}


def test_oncall_role_ends_nothing_once_the_transaction_shown_is_over(queue, monkeypatch,
                                                                    capsys):
    """When the ending statement finds the pid in another transaction than the one shown
    (the session moved on, or a new session got the pid), nothing is ended: exit 1."""
    (admin, _app, oncall), holder, _alter, _outcomes = queue
    monkeypatch.setattr(queries, "TERMINATE_HIDDEN", queries.TERMINATE_HIDDEN.replace(
        "l.virtualtransaction = %(transaction)s",
        "l.virtualtransaction = %(transaction)s || 'x'"))
    assert main(["blockers", "--dsn", oncall, "--terminate", str(holder), "--yes"]) == 1
    out = capsys.readouterr().out
    assert f"pid {holder} is no longer in the transaction shown" in out
    assert "nothing ended" in out
    assert _alive(admin, holder)


def test_the_hidden_guard_ends_only_the_same_transaction(queue):
    """TERMINATE_HIDDEN as the on-call role: another transaction, user or database gives no
    row and the session stays; the one seen in pg_locks ends it."""
    (admin, _app, oncall), holder, _alter, _outcomes = queue
    with psycopg.connect(oncall, autocommit=True) as conn:
        vxid, user, database = conn.execute(
            "SELECT l.virtualtransaction, a.usename::text, a.datname::text FROM pg_locks l "
            "JOIN pg_stat_activity a USING (pid) WHERE l.pid = %s LIMIT 1",
            (holder,)).fetchone()
        same = {"pid": holder, "usename": user, "database": database, "transaction": vxid}
        for other in ({"transaction": "999/999999"}, {"usename": "someone_else"},
                      {"database": "another"}):
            assert conn.execute(queries.TERMINATE_HIDDEN, {**same, **other}).fetchone() is None
            assert _alive(admin, holder)
        assert conn.execute(queries.TERMINATE_HIDDEN, same).fetchone() == (True,)


def test_oncall_role_will_not_end_a_hidden_session_outside_a_transaction(roles, capsys):
    """An idle session of another role: no start time and no transaction to tell it from a
    later one, and no lock held: refused with what a pg_read_all_stats role could do,
    exit 1, the session stays."""
    admin, app, oncall = roles
    with psycopg.connect(app, autocommit=True) as idle:
        pid = idle.info.backend_pid
        assert main(["blockers", "--dsn", oncall, "--terminate", str(pid), "--yes"]) == 1
        err = capsys.readouterr().err
        assert "in no transaction, so it holds no lock" in err
        assert "pg_monitor" in err and "nothing ended" in err
        assert _alive(admin, pid)


def test_oncall_role_is_refused_a_superusers_session_in_one_line(roles, capsys):
    """A superuser's session in a transaction: asked about twice (--yes --yes-superuser), then
    PostgreSQL's refusal in one line, exit 1, no traceback; the session stays."""
    admin, _app, oncall = roles
    with psycopg.connect(admin) as boss:
        boss.execute("SELECT 1")  # in a transaction
        pid = boss.info.backend_pid
        code = main(["blockers", "--dsn", oncall, "--terminate", str(pid), "--yes",
                     "--yes-superuser"])
        out = capsys.readouterr().out
        assert code == 1
        assert f"pid {pid}: PostgreSQL refused to terminate it" in out
        assert _alive(admin, pid)
