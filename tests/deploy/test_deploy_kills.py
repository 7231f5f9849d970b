"""The order of the limits (docs/deploying.md): deadline < Celery soft_time_limit <
time_limit, and deadline < gunicorn's --timeout. A process killed mid-query closes its
connections, and behind PgBouncer each is a not-ready closure: a destroyed server connection.
Under a database stall (a lock holder), the right order ends the wait and kills nothing; the
reversed order kills the process inside its transaction, and PgBouncer destroys the server
connection once the blocked statement fails (PgBouncer reads a client's socket again only
when the server answers: a process killed during a one-statement call costs nothing, one
killed inside a transaction costs a server connection)."""

from __future__ import annotations

import json
import threading
import time

import psycopg
import pytest

from conftest import Bouncer, get, start_gunicorn, stop, until_ready

STALL = 8.0  # seconds the lock holder keeps the table from every reader
# The services' lock_timeout outlasts the stall: the statement waits until the holder lets go
# (a kill then always lands inside the transaction, whatever the machine's speed).
LOCK_TIMEOUT = "30"


def _stock(bouncer: Bouncer) -> None:
    with psycopg.connect(bouncer.direct, autocommit=True) as conn:
        conn.execute("create table stock (sku text primary key, n int)")


def _not_ready(bouncer: Bouncer, reader: object, settle: float = 1.0) -> int:
    time.sleep(settle)  # PgBouncer writes its log asynchronously
    return int(reader.counts().total["not_ready"])  # type: ignore[attr-defined]


def _queued_behind_lock(bouncer: Bouncer, within: float = 15.0) -> bool:
    """Whether a statement on ``stock`` comes to wait for a lock within ``within`` seconds."""
    end = time.monotonic() + within
    with psycopg.connect(bouncer.direct, autocommit=True) as conn:
        while time.monotonic() < end:
            row = conn.execute(
                "select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
                "and datname = current_database() and query ilike '%%stock%%' "
                "and pid <> pg_backend_pid()").fetchone()
            if row and row[0]:
                return True
            time.sleep(0.05)
    return False


def _some_not_ready(bouncer: Bouncer, reader: object, within: float = 20.0) -> int:
    """The not-ready closures once PgBouncer has logged at least one, waiting up to ``within``
    (it closes the server connection only when the blocked statement ends, and logs it a
    moment later: a busy machine takes longer)."""
    end = time.monotonic() + within
    while True:
        count = _not_ready(bouncer, reader, settle=0.5)
        if count or time.monotonic() >= end:
            return count


ORDERS = {
    # deadline < soft_time_limit < time_limit: the task gives up at its deadline
    "deadline-first": {"JOB_DEADLINE": "1", "JOB_SOFT_TIME_LIMIT": "4", "JOB_TIME_LIMIT": "6"},
    # reversed: the hard limit comes before the deadline and kills the process mid-transaction
    # (with a soft limit below the hard one, billiard kills only after the soft one fired)
    "reversed": {"JOB_DEADLINE": "6", "JOB_SOFT_TIME_LIMIT": "none", "JOB_TIME_LIMIT": "2"},
}


@pytest.mark.parametrize("order", ORDERS)
def test_celery_limits_in_order_kill_nothing_under_a_stall(
        order, bouncer, celery_worker, pgsteady_lock_holder):
    """Two tasks write, in a transaction, to a table a lock holder keeps for 8 s. Deadline first: both return at
    their deadline, no hard time limit fires, 0 not-ready closures. Reversed: the hard limit
    kills the pool process and PgBouncer logs not-ready closures."""
    _stock(bouncer)
    worker = celery_worker(LOCK_TIMEOUT=LOCK_TIMEOUT, **ORDERS[order])
    # both pool processes connected before the stall (a task each, at once)
    warm = [worker.send("whoami", f"warm{n}") for n in range(4)]
    assert all(result.get(timeout=60) for result in warm)
    reader = bouncer.cluster.pgbouncer.log_reader()
    holder = pgsteady_lock_holder(bouncer.direct, "stock", "ACCESS EXCLUSIVE")
    held_at = time.monotonic()
    results = [worker.send("restock") for _ in range(2)]
    queued = _queued_behind_lock(bouncer)
    outcomes = []
    for result in results:
        try:
            outcomes.append(result.get(timeout=30))
        except Exception as exc:  # the task's process was killed
            outcomes.append({"failed": type(exc).__name__})
    time.sleep(max(0.0, STALL - (time.monotonic() - held_at)))
    holder.release()
    log = worker.close()
    not_ready = _not_ready(bouncer, reader) if order == "deadline-first" else \
        _some_not_ready(bouncer, reader)
    assert queued, "no task's statement queued behind the lock\n" + log[-3000:]
    if order == "deadline-first":
        assert outcomes == [{"deadline": "running"}] * 2
        assert "Hard time limit" not in log
        assert not_ready == 0
    else:
        assert all("failed" in outcome for outcome in outcomes), outcomes
        assert "Hard time limit" in log
        assert not_ready >= 1, log[-5000:]


GUNICORN_ORDERS = {
    "deadline-first": ((), {"WEB_DEADLINE": "1"}),  # the page's timeout = 30
    "reversed": (("--timeout", "2"), {"WEB_DEADLINE": "6"}),
}


@pytest.mark.parametrize("order", GUNICORN_ORDERS)
def test_gunicorn_limits_in_order_kill_nothing_under_a_stall(
        order, bouncer, tmp_path, pgsteady_lock_holder):
    """A sync worker's request writes to a locked table in a transaction. Deadline < --timeout: a 504 at the
    deadline, no WORKER TIMEOUT, 0 not-ready closures. Reversed: gunicorn kills the worker
    mid-query and PgBouncer destroys its server connection (a not-ready closure). The worker
    is ready (connected) before the stall, and the test sees its statement queue behind the
    lock: the kill lands on a statement in flight, however slow the machine."""
    _stock(bouncer)
    extra, env = GUNICORN_ORDERS[order]
    proc, port, log = start_gunicorn("gunicorn_conf.py", "wsgi_app:app", bouncer, tmp_path,
                                     *extra, WEB_CONCURRENCY="1", LOCK_TIMEOUT=LOCK_TIMEOUT,
                                     **env)
    answer: dict[str, tuple[int, dict[str, object]]] = {}

    def restock() -> None:
        try:
            answer["restock"] = get(port, "/restock", timeout=20)
        except OSError as exc:  # the worker died under the request
            answer["restock"] = (0, {"error": repr(exc)})

    try:
        ready = until_ready(port, "/health/ready")
        reader = bouncer.cluster.pgbouncer.log_reader()
        holder = pgsteady_lock_holder(bouncer.direct, "stock", "ACCESS EXCLUSIVE")
        held_at = time.monotonic()
        request = threading.Thread(target=restock)
        request.start()
        queued = _queued_behind_lock(bouncer)
        request.join(30)
        time.sleep(max(0.0, STALL - (time.monotonic() - held_at)))
        holder.release()
    finally:
        output = stop(proc)
    text = log.read_text() + output
    assert ready[0] == 200, json.dumps(ready) + "\n" + text[-3000:] + \
        bouncer.cluster.pgbouncer.log_path.read_text()[-3000:]
    assert queued, "the request's statement never queued behind the lock\n" + text[-3000:]
    status, body = answer["restock"]
    not_ready = _not_ready(bouncer, reader) if order == "deadline-first" else \
        _some_not_ready(bouncer, reader)
    if order == "deadline-first":
        assert status == 504, body
        assert "WORKER TIMEOUT" not in text
        assert not_ready == 0, bouncer.cluster.pgbouncer.log_path.read_text()[-5000:] + text
    else:
        assert status != 200
        assert "WORKER TIMEOUT" in text, text[-2000:]
        assert not_ready >= 1, bouncer.cluster.pgbouncer.log_path.read_text()[-5000:] + text
