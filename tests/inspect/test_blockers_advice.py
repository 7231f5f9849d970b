"""The incident, one story: with an ALTER waiting in a lock queue, blockers advises cancelling
that DDL first (the runbook's order) and the root only then; blockers, watch and doctor count
the same sessions; counts read "1 session", never "1 sessions"; doctor's fix names the
statement that waits, not the first of several sent at once."""

from __future__ import annotations

import contextlib
import json
import threading
import time

import psycopg
import pytest

from pgsteady.cli import main
from pgsteady.inspect.findings import waiting_statement


def _waiting(dsn: str, count: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(200):
            row = conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
            if row is not None and row[0] >= count:
                return
            time.sleep(0.05)
    pytest.fail(f"fewer than {count} sessions waiting")


@pytest.fixture
def queue(pgsteady_database):
    """A report idle in transaction on queued, a migration waiting for ACCESS EXCLUSIVE that
    sent two statements at once, and ``readers`` reads behind it; yields (dsn, holder pid,
    alter pid, reader pids)."""
    dsn = pgsteady_database.dsn
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("CREATE TABLE queued (id int)")
    holder = psycopg.connect(dsn, application_name="report")
    holder.execute("SELECT * FROM queued")
    conns = [psycopg.connect(dsn, autocommit=True, application_name=f"w{i}") for i in range(3)]
    sql = ["SET lock_timeout = 0; ALTER TABLE queued ADD y int",
           "SELECT count(*) FROM queued", "SELECT count(*) FROM queued"]
    threads = []
    for n, (conn, statement) in enumerate(zip(conns, sql, strict=True)):
        def run(conn: psycopg.Connection = conn, statement: str = statement) -> None:
            with contextlib.suppress(psycopg.Error):
                conn.execute(statement)
        threads.append(threading.Thread(target=run, daemon=True))
        threads[-1].start()
        _waiting(dsn, n + 1)
    try:
        yield dsn, holder.info.backend_pid, conns[0].info.backend_pid, \
            [c.info.backend_pid for c in conns[1:]]
    finally:
        holder.close()
        for thread in threads:
            thread.join(10)
        for conn in conns:
            conn.close()


def test_blockers_advises_cancelling_the_waiting_ddl_first(queue, capsys):
    """The last lines: cancel the waiting ALTER (--cancel its pid) first, then the root;
    the header counts in words: 1 root blocker, 3 sessions waiting."""
    dsn, holder, alter, _readers = queue
    assert main(["blockers", "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("1 root blocker, 3 sessions waiting")
    assert "(s)" not in out
    advice = out.strip().splitlines()[-2:]
    assert advice[0].startswith("first cancel the waiting ALTER TABLE (one of the 2 statements "
                                "it sent) (2 sessions queued behind it): pgsteady blockers "
                                f"--cancel {alter} ")
    assert advice[1].startswith(f"then, if it should not be running, end the root: pgsteady "
                                f"blockers --terminate {holder} ")


def test_without_a_waiting_ddl_the_advice_is_the_root(pgsteady_database, capsys):
    """A plain blocking chain (no ACCESS EXCLUSIVE request waits): end a root, as before;
    '1 session waiting'."""
    dsn = pgsteady_database.dsn
    with psycopg.connect(dsn) as holder, \
            psycopg.connect(dsn, autocommit=True) as waiter:
        holder.execute("CREATE TABLE rows_ (id int primary key)")
        holder.commit()
        holder.execute("INSERT INTO rows_ VALUES (1)")
        root = holder.info.backend_pid
        blocked = threading.Thread(target=_insert, args=(waiter,), daemon=True)
        blocked.start()
        _waiting(dsn, 1)
        assert main(["blockers", "--dsn", dsn]) == 0
        out = capsys.readouterr().out
        holder.rollback()
        blocked.join(10)
    assert out.splitlines()[0].startswith("1 root blocker, 1 session waiting")
    assert out.strip().splitlines()[-1] == \
        f"end a root with: pgsteady blockers --terminate {root} (asks first)"


def _insert(conn: psycopg.Connection) -> None:
    with contextlib.suppress(psycopg.Error):
        conn.execute("INSERT INTO rows_ VALUES (1)")


def test_doctor_blockers_and_watch_count_the_same_sessions(queue, capsys):
    """doctor's lock-queue finding, blockers' chain and watch's chain all count 3 sessions
    (the ALTER and the two reads behind it); doctor's fix names the ALTER, not the SET sent
    before it, and offers blockers --cancel."""
    dsn, _holder, alter, _readers = queue
    assert main(["doctor", "--dsn", dsn, "--json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    [lock_queue] = [f for f in findings if f["id"] == "lock-queue"]
    assert lock_queue["title"].startswith("3 sessions waiting on public.queued: pid "
                                          f"{alter} waits for ACCESS EXCLUSIVE")
    assert lock_queue["evidence"]["waiting_total"] == 3
    assert "the waiting ALTER TABLE (one of the 2 statements it sent)" in lock_queue["fix"]
    assert "SET LOCK_TIMEOUT" not in lock_queue["fix"]
    assert f"pgsteady blockers --cancel {alter}" in lock_queue["fix"]
    assert main(["blockers", "--dsn", dsn, "--json"]) == 0
    [chain] = json.loads(capsys.readouterr().out)["chains"]
    assert chain["queued_total"] == 3
    assert main(["watch", "--dsn", dsn, "--count", "1", "--json-lines"]) == 0
    watched = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert [c["queued"] for c in watched["postgres"]["chains"]] == [3]


@pytest.mark.parametrize(("query", "said"), [
    ("ALTER TABLE t ADD c int", "ALTER TABLE"),
    ("SET lock_timeout = '1s'; ALTER TABLE t ADD c int", "ALTER TABLE (one of the 2 statements "
                                                          "it sent)"),
    ("-- deploy 42\nBEGIN; LOCK TABLE t; UPDATE t SET c = 1; COMMIT",
     "LOCK TABLE (one of the 4 statements it sent)"),
    ("ALTER TABLE a ADD c int; ALTER TABLE b ADD c int",
     "statement, one of the 2 it sent (ALTER TABLE, ALTER TABLE, ...)"),
])
def test_waiting_statement_names_the_ddl_among_several(query, said):
    """The statement quoted is the one that takes the strong lock; when two could, it says
    the waiter is one of several."""
    assert waiting_statement(query) == said
