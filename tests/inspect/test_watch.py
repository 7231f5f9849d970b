"""`pgsteady watch` in a real terminal (tmux) during seed 002's lock queue, and as JSON lines."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

import psycopg
import pytest
from test_doctor_seed import QUEUED, ROOT_LABEL, seed_scene  # noqa: F401  (a fixture)

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def _wait_for(read: Callable[[], str], ok: Callable[[str], bool], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    text = read()
    while not ok(text) and time.monotonic() < deadline:
        time.sleep(0.2)
        text = read()
    assert ok(text), text
    return text


@needs_tmux
def test_watch_in_tmux(seed_scene, pgsteady_stack, pgsteady_database, tmp_path):  # noqa: F811
    """The pool and alert panes appear; the lock-queue alert goes from pending to firing as
    the view updates; Ctrl-C exits 0 and leaves no process and no session behind."""
    lab = pgsteady_stack(pool_size=2)
    with psycopg.connect(lab.pooled_dsn(pgsteady_database.name), autocommit=True) as conn:
        conn.execute("SELECT 1")  # PgBouncer shows the pool once it has been used
    config = tmp_path / "alerts.toml"
    config.write_text('lock_queue_length_for = "2s"\n')
    command = " ".join(shlex.quote(part) for part in (
        "env", "-u", "COLUMNS", "-u", "LINES", sys.executable, "-m", "pgsteady", "watch", "--dsn", seed_scene["dsn"], "--pgbouncer",
        lab.admin_dsn, "--interval", "0.5s", "--config", str(config)))
    sock = str(tmp_path / "tmux.sock")
    tmux = ["tmux", "-S", sock, "-f", "/dev/null"]
    subprocess.run([*tmux, "new-session", "-d", "-s", "w", "-x", "160", "-y", "60",
                    f"{command}; echo EXITED=$?; sleep 60"], check=True, timeout=10)

    def pane() -> str:
        return subprocess.run([*tmux, "capture-pane", "-p", "-t", "w"], capture_output=True,
                              text=True, timeout=10, check=False).stdout

    try:
        first = _wait_for(pane, lambda t: "PgsteadyLockQueue" in t and "Alerts" in t, 20)
        assert "PgBouncer pools" in first and "cl_waiting" in first and "sv_login" in first
        assert f"{pgsteady_database.name}/" in first  # the pool's row
        assert ROOT_LABEL in first  # the blocking chain, by its root's label
        assert "relation=public.orgs" in first
        _wait_for(pane, lambda t: "firing" in t, 15)
        subprocess.run([*tmux, "send-keys", "-t", "w", "C-c"], check=True, timeout=10)
        done = _wait_for(pane, lambda t: "EXITED=" in t, 15)
        assert "EXITED=0" in done and "Traceback" not in done
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=10, check=False)
    with psycopg.connect(seed_scene["dsn"], autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name "
                            "LIKE 'pgsteady-watch@%'").fetchone()
    assert left == (0,)


def test_watch_json_lines(seed_scene):  # noqa: F811
    """Without a terminal: one JSON object per interval, --count of them, the lock queue and
    its root in each, then exit 0."""
    done = subprocess.run(
        [sys.executable, "-m", "pgsteady", "watch", "--dsn", seed_scene["dsn"], "--interval",
         "0.2s", "--count", "3"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == 3
    for view in lines:
        assert view["schema_version"] == 1 and view["up"] == {"postgres": True}
        [chain] = view["postgres"]["chains"]
        assert chain["root"] == ROOT_LABEL and chain["queued"] == QUEUED + 1
    queue = [a for a in lines[-1]["alerts"] if a["alert"] == "PgsteadyLockQueue"]
    assert queue and queue[0]["state"] == "pending" and queue[0]["labels"] == {
        "relation": "public.orgs"}


@pytest.mark.parametrize("flag", ["--dsn", "--pgbouncer"])
@pytest.mark.parametrize("verb", [["watch", "--interval", "0.2s", "--count", "3"],
                                  ["exporter", "--listen", "127.0.0.1:0"]])
def test_a_source_given_in_the_wrong_place_is_refused(verb, flag, pgsteady_stack,
                                                      pgsteady_database):
    """PgBouncer's admin console given as --dsn (or PostgreSQL as --pgbouncer) could never
    answer: watch and the exporter say so in one line at start and exit 2, instead of showing
    the source down forever."""
    cluster = pgsteady_stack(pool_size=1)
    wrong = cluster.admin_dsn if flag == "--dsn" else cluster.direct_dsn(pgsteady_database.name)
    done = subprocess.run([sys.executable, "-m", "pgsteady", *verb, flag, wrong],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "admin console" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""
