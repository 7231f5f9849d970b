"""Seed 002 on the lab cluster: a dashboard read holds orgs, an ALTER waits, twenty queue."""

from __future__ import annotations

import json
import time
from concurrent.futures import Future, ThreadPoolExecutor

import psycopg
import pytest

from pgsteady.cli import main

ROOT_LABEL = "dashboard-logs@api-7:4121"
QUEUED = 20


def _wait_for_lock_waits(dsn: str, count: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                               "current_database() AND wait_event_type = 'Lock'").fetchone()
            if row is not None and row[0] >= count:
                return
            time.sleep(0.05)
    raise AssertionError(f"fewer than {count} sessions waiting on a lock after {timeout}s")


@pytest.fixture
def seed_scene(pgsteady_database):
    """orgs held by an open dashboard read; an ALTER waiting; twenty reads queued behind it."""
    dsn = pgsteady_database.dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE orgs (id int PRIMARY KEY, name text)")
        conn.execute("INSERT INTO orgs SELECT g, 'org ' || g FROM generate_series(1, 100) g")
    root = psycopg.connect(dsn, application_name=ROOT_LABEL)
    root.execute("SELECT id, name FROM orgs WHERE id > 0")  # begin; select ... left open
    pool = ThreadPoolExecutor(max_workers=QUEUED + 1)
    alter_pid: Future[int] = Future()

    def alter() -> None:
        with psycopg.connect(dsn, autocommit=True, application_name="api-migrate@api-1:77",
                             options="-c statement_timeout=60s") as conn:
            alter_pid.set_result(conn.info.backend_pid)
            conn.execute("ALTER TABLE orgs ADD COLUMN flag boolean")

    def read(i: int) -> None:
        with psycopg.connect(dsn, autocommit=True, application_name=f"api@api-{i}:1",
                             options="-c statement_timeout=60s") as conn:
            conn.execute("SELECT name FROM orgs WHERE id = 1")

    try:
        altered = pool.submit(alter)
        _wait_for_lock_waits(dsn, 1)
        reads = [pool.submit(read, i) for i in range(QUEUED)]
        _wait_for_lock_waits(dsn, QUEUED + 1)
        yield {"dsn": dsn, "root": root.info.backend_pid, "alter": alter_pid.result(5),
               "altered": altered, "reads": reads}
    finally:
        root.close()  # whatever happened, the chain resolves and the threads finish
        pool.shutdown(wait=True, cancel_futures=True)


def _run(capsys, *argv: str) -> tuple[int, str, str, float]:
    start = time.monotonic()
    code = main(list(argv))
    elapsed = time.monotonic() - start
    out, err = capsys.readouterr()
    return code, out, err, elapsed


def test_seed_002_scene(seed_scene, capsys):
    """doctor names the lock queue (root, ALTER, 20 queued) in under 2 s while it is stuck;
    blockers shows one chain of 21; --terminate ends the root and the ALTER completes."""
    dsn, root, alter = seed_scene["dsn"], seed_scene["root"], seed_scene["alter"]

    code, out, err, elapsed = _run(capsys, "doctor", "--dsn", dsn, "--json")
    assert code == 1, err
    assert elapsed < 2.0
    report = json.loads(out)
    assert report["schema_version"] == 1
    queues = [f for f in report["findings"] if f["id"] == "lock-queue"]
    assert len(queues) == 1
    queue = queues[0]
    assert queue["severity"] == "critical"
    assert report["findings"][0]["id"] == "lock-queue"  # most severe first
    assert [r["pid"] for r in queue["evidence"]["roots"]] == [root]
    assert queue["evidence"]["roots"][0]["application_name"] == ROOT_LABEL
    assert queue["evidence"]["waiting_for_access_exclusive"]["pid"] == alter
    assert queue["evidence"]["queued_total"] == QUEUED
    assert f"pg_cancel_backend({alter})" in queue["fix"]
    assert f"pg_terminate_backend({root})" in queue["fix"]

    code, out, err, elapsed = _run(capsys, "doctor", "--dsn", dsn)
    assert code == 1 and elapsed < 2.0
    assert "CRITICAL lock-queue" in out
    assert f"pid {root} '{ROOT_LABEL}'" in out and f"pid {alter}" in out

    code, out, err, _ = _run(capsys, "blockers", "--dsn", dsn, "--json")
    assert code == 0, err
    tree = json.loads(out)
    assert tree["schema_version"] == 1
    assert len(tree["chains"]) == 1
    chain = tree["chains"][0]
    assert chain["root"]["pid"] == root
    assert chain["root"]["application_name"] == ROOT_LABEL
    assert chain["queued_total"] == QUEUED + 1
    assert {q["pid"] for q in chain["queued"] if q["blocked_by"] == [root]} == {alter}
    assert all(q["blocked_by"] == [alter] for q in chain["queued"] if q["pid"] != alter)
    assert tree["queued_per_relation"] == {"public.orgs": QUEUED + 1}

    code, out, err, _ = _run(capsys, "blockers", "--dsn", dsn)
    assert code == 0 and f"ROOT pid {root} '{ROOT_LABEL}'" in out

    code, out, err, _ = _run(capsys, "blockers", "--dsn", dsn, "--terminate", str(root))
    assert code == 2  # no terminal to confirm on, no --yes: refused
    assert "--yes" in err and not seed_scene["altered"].done()

    code, out, err, _ = _run(capsys, "blockers", "--dsn", dsn, "--terminate", str(root), "--yes")
    assert code == 2  # the lab's sessions are a superuser's: --yes alone does not do
    assert "--yes-superuser" in err and not seed_scene["altered"].done()

    code, out, err, _ = _run(capsys, "blockers", "--dsn", dsn, "--terminate", str(root), "--yes",
                             "--yes-superuser")
    assert code == 0, err
    assert f"pid {root}: terminated, gone" in out
    seed_scene["altered"].result(timeout=10)  # the ALTER completes
    for read in seed_scene["reads"]:
        read.result(timeout=10)
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM information_schema.columns WHERE "
                           "table_name = 'orgs' AND column_name = 'flag'").fetchone()
    assert row == (1,)


def test_doctor_takes_no_lock_on_queued_relations(seed_scene, capsys):
    """With a 0.5 s budget doctor still finishes: none of its reads queues behind the ALTER
    (its lock_timeout is 100 ms), and its labelled session is gone afterwards."""
    dsn = seed_scene["dsn"]
    code, out, err, elapsed = _run(capsys, "doctor", "--dsn", dsn, "--json", "--timeout", "0.5s")
    assert code == 1, err
    assert elapsed < 2.0
    assert any(f["id"] == "lock-queue" for f in json.loads(out)["findings"])
    with psycopg.connect(dsn, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name "
                            "LIKE 'pgsteady-doctor@%'").fetchone()
    assert left == (0,)
