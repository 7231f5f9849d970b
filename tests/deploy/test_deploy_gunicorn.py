"""gunicorn ``--preload`` for real, through PgBouncer in transaction mode: sync workers over a
``Database`` made at import, uvicorn workers over an ``AsyncDatabase`` and an ``AsyncSteady``
made at import. Every response must be its own request's answer (issue 37 measured 185 of 240
wrong on sync workers)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from conftest import get, parent_clients, start_gunicorn, stop, until_ready

CLIENTS = 8
REQUESTS = 30  # per client: 240 in all


def hammer(port: int, check: Any) -> dict[str, Any]:
    """CLIENTS threads x REQUESTS requests to /whoami; ``check(body)`` says if it is right."""
    tally: dict[str, Any] = {"ok": 0, "wrong": 0, "errors": 0, "pids": set(), "first": None}
    lock = threading.Lock()

    def client(n: int) -> None:
        for i in range(REQUESTS):
            try:
                status, body = get(port, f"/whoami?rid=c{n}r{i}")
            except OSError as exc:
                status, body = 0, {"error": repr(exc)}
            with lock:
                if status != 200:
                    tally["errors"] += 1
                    tally["first"] = tally["first"] or (status, body)
                elif check(body):
                    tally["ok"] += 1
                    tally["pids"].add(body["pid"])
                else:
                    tally["wrong"] += 1
                    tally["first"] = tally["first"] or (status, body)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    return tally


def test_gunicorn_preload_sync_workers_answer_their_own_requests(bouncer, tmp_path):
    """gunicorn --preload, 3 sync workers, the app's Database made at import in the master:
    240 requests, 0 wrong answers, 0 errors, several workers served, no traceback in the log,
    and the master's own Database answers right before the fork and after its workers exit,
    on the same PgBouncer sessions it had before the load."""
    proc, port, log = start_gunicorn("master_watch.py", "wsgi_app:app", bouncer, tmp_path)
    try:
        parent = parent_clients(bouncer, proc.pid, at_least=2)
        tally = hammer(port, lambda body: body["got"] == body["asked"])
        after = parent_clients(bouncer, proc.pid)
    finally:
        output = stop(proc)
    text = log.read_text() + output
    assert tally["wrong"] == 0, tally
    assert tally["errors"] == 0, tally
    assert tally["ok"] == CLIENTS * REQUESTS
    assert len(tally["pids"]) >= 2, "one worker served everything: no fork was exercised"
    assert "Traceback" not in text, text[-3000:]
    assert len(parent) == 2 and parent <= after  # the master's sessions, untouched
    master = json.loads((tmp_path / "master.json").read_text())
    assert master["before"] == {"wrong": 0, "errors": 0, "first_error": None}
    assert master["after"] == {"wrong": 0, "errors": 0, "first_error": None}


def test_gunicorn_preload_uvicorn_workers_answer_their_own_requests(bouncer, tmp_path):
    """gunicorn --preload with uvicorn workers, AsyncDatabase and AsyncSteady made at import:
    240 requests, each answered with its own text by both, 0 errors, no traceback."""
    proc, port, log = start_gunicorn("gunicorn_uvicorn_conf.py", "asgi_app:app", bouncer,
                                     tmp_path)
    try:
        tally = hammer(port, lambda body: body["got"] == body["asked"] == body["steady"])
    finally:
        output = stop(proc)
    text = log.read_text() + output
    assert tally["wrong"] == 0, tally
    assert tally["errors"] == 0, tally
    assert tally["ok"] == CLIENTS * REQUESTS
    assert len(tally["pids"]) >= 2
    assert "Traceback" not in text, text[-3000:]


@pytest.mark.parametrize("probe", ["live", "ready", "deep"])
def test_gunicorn_workers_serve_the_probes(bouncer, tmp_path, probe):
    """The Kubernetes probes the page points at answer 200 from a preloaded, forked worker:
    live at once; ready and deep, which need the database, once the workers have opened their
    first connections (asked as the kubelet asks, every period until ready: the pod is out of
    rotation until then), and from then on every time, whichever worker answers."""
    proc, port, log = start_gunicorn("gunicorn_conf.py", "wsgi_app:app", bouncer, tmp_path)
    try:
        if probe == "live":
            status, body = get(port, f"/health/{probe}")
            asks, after = 1, []
        else:
            status, body, asks = until_ready(port, f"/health/{probe}")
            after = [get(port, f"/health/{probe}") for _ in range(6)] if status == 200 else []
    finally:
        output = stop(proc)
    seen = json.dumps(body) + f" after {asks} asks\n" + (log.read_text() + output)[-3000:] + \
        bouncer.cluster.pgbouncer.log_path.read_text()[-3000:]
    assert status == 200, seen
    assert [code for code, _ in after] == [200] * len(after), after
