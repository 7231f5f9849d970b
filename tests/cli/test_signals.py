"""SIGTERM (what Kubernetes and systemd send) ends every verb as Ctrl-C does: one line, the work
it started on the server cancelled, not left to finish after the process is gone."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psycopg

PGSTEADY = [sys.executable, "-m", "pgsteady"]


def test_sigterm_during_migrate_cancels_the_migration(pgsteady_database, tmp_path):
    """A migrate killed by SIGTERM mid-statement exits 143 in one line, and its migration is
    rolled back on the server (it used to run on and commit after the process died)."""
    (tmp_path / "0001_slow.sql").write_text("select pg_sleep(4);\ncreate table slow (id int);\n")
    proc = subprocess.Popen([*PGSTEADY, "migrate", "--dsn", pgsteady_database.dsn, "--dir",
                             str(tmp_path), "--no-preflight"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
            give_up = time.monotonic() + 20
            while time.monotonic() < give_up and not conn.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE query LIKE '%pg_sleep(4)%' "
                    "AND pid <> pg_backend_pid()").fetchone():
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
            time.sleep(0.3)
            running = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                                   "'%pg_sleep(4)%' AND pid <> pg_backend_pid()").fetchone()
            time.sleep(4)  # past the sleep: a statement left running would have committed
            table = conn.execute("SELECT to_regclass('slow')").fetchone()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143
    assert err.strip().splitlines() == ["pgsteady: terminated (SIGTERM)"]
    assert running == (0,)
    assert table == (None,)


def test_ctrl_c_during_a_lab_run_stops_it_at_once():
    """Ctrl-C in the middle of a 60 s `steady` run: the run stops within seconds, exit 130,
    one line, no server left (the caller threads ran on to the run's end, then 36 s later
    the command exited)."""
    proc = subprocess.Popen([sys.executable, "-m", "pgsteady", "-v", "lab", "pool-drain",
                             "--strategy", "steady", "--duration", "60s", "--burst", "0@1s-2s"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT,  # noqa: PLW1509
                                                             signal.default_int_handler))
    assert proc.stderr is not None
    seen = []
    try:
        while True:  # the run's cluster is the second one (the first measures pgbench)
            line = proc.stderr.readline()
            assert line, "".join(seen)
            seen.append(line)
            if sum("lab cluster up" in s for s in seen) == 2:
                break
        time.sleep(3)  # inside the run
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        code = proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert code == 130, rest
    assert took < 30  # 57 s of the run were left
    assert "Traceback" not in rest and rest.strip().splitlines()[-1] == "pgsteady: interrupted"
    for line in seen:
        if "lab cluster up in " in line:
            workdir = line.split("lab cluster up in ", 1)[1].strip()
            left = subprocess.run(["pgrep", "-f", workdir], capture_output=True, check=False)
            assert left.stdout == b"", workdir  # no server of the run left behind
