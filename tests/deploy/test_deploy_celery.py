"""Celery's prefork pool for real, with the lab's (password-protected) Redis as broker and
result store, and a Database made at import reaching PostgreSQL through PgBouncer in
transaction mode (issue 37 measured 42 of 60 task results wrong)."""

from __future__ import annotations

import time

from conftest import parent_clients

TASKS = 60


def test_celery_prefork_tasks_get_their_own_answers(celery_worker):
    """60 tasks on a 2-process prefork pool sharing a Database made at import: 0 wrong
    results, 0 failed tasks, both processes worked, the main process's own PgBouncer
    sessions still open after them, no traceback in the worker's log."""
    worker = celery_worker()
    parent = parent_clients(worker.bouncer, worker.proc.pid, at_least=2)
    assert len(parent) == 2, "the main process's Database (made at import) did not connect"
    results = [worker.send("whoami", f"t{i}") for i in range(TASKS)]
    wrong, errors, pids = 0, [], set()
    for result in results:
        try:
            body = result.get(timeout=60)
        except Exception as exc:
            errors.append(repr(exc)[:300])
            continue
        wrong += body["got"] != body["asked"]
        pids.add(body["pid"])
    # untouched by the children (whose own sessions may carry the same application_name)
    assert parent <= parent_clients(worker.bouncer, worker.proc.pid)
    log = worker.close()
    assert wrong == 0
    assert errors == []
    assert len(pids) == 2, "one process ran everything: the fork was not exercised"
    assert "Traceback" not in log, log[-3000:]


def test_celery_beat_burst_is_spread_and_answered(celery_worker):
    """The beat entry's task (top of the hour) spreads its 20 jobs over the burst window
    instead of queuing them at once; every job still answers its own question."""
    worker = celery_worker(JOB_BURST_SPREAD="4")
    started = time.monotonic()
    assert worker.send("hourly_checks", 20).get(timeout=30) == 20
    inspector = worker.client.control.inspect(timeout=2)
    scheduled = inspector.scheduled() or {}
    etas = sorted(item["eta"] for items in scheduled.values() for item in items)
    assert len(set(etas)) >= 10, "the jobs were not spread over the window"
    deadline = started + 60
    log = ""
    while time.monotonic() < deadline:
        log = worker.log.read_text()
        if log.count("celery_app.whoami[") >= 40:  # received + succeeded, per job
            break
        time.sleep(0.3)
    log = worker.close()
    assert log.count("succeeded in") >= 20, log[-3000:]
    assert "Traceback" not in log
