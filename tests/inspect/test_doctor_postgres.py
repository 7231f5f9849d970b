"""doctor on PostgreSQL: settings on a default vs a docs-configured server, the other
checks on real sessions, and bad input (unreachable, misdirected DSNs)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from pgsteady.cli import main
from pgsteady.lab import _process
from pgsteady.lab.cluster import Postgres, make_workdir

INCIDENTS = Path(__file__).parents[2] / "docs" / "incidents" / "index.md"
SETTING_IDS = {
    "setting-statement-timeout", "setting-lock-timeout", "setting-idle-in-transaction-timeout",
    "setting-client-connection-check-interval", "setting-tcp-keepalives",
    "setting-log-lock-waits", "setting-log-min-duration-statement",
}


def _doctor(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["doctor", "--json", *argv])
    out, err = capsys.readouterr()
    assert out, err
    return code, json.loads(out)


def docs_settings() -> dict[str, str]:
    """The postgresql.conf block under "The settings doctor wants" (docs: incidents)."""
    text = INCIDENTS.read_text()
    section = text.split("## The settings doctor wants", 1)[1]
    block = section.split("```ini", 1)[1].split("```", 1)[0]
    settings = {}
    for raw in block.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, value = (part.strip() for part in line.split("=", 1))
            settings[name] = value.strip("'")
    return settings


def test_default_server_gets_every_setting_finding(pgsteady_database, capsys):
    """A lab PostgreSQL with default settings gets all seven setting-* findings as warnings,
    each naming where its value comes from."""
    _, report = _doctor(capsys, "--dsn", pgsteady_database.dsn)
    found = {f["id"]: f for f in report["findings"] if f["id"].startswith("setting-")}
    assert set(found) == SETTING_IDS
    assert {f["severity"] for f in found.values()} == {"warning"}
    assert found["setting-statement-timeout"]["evidence"]["statement_timeout"]["source"] == "default"


def test_database_override_is_reported_with_its_source(pgsteady_database, capsys):
    """ALTER DATABASE ... SET statement_timeout silences the finding for that database and is
    named as the source."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{pgsteady_database.name}" SET statement_timeout = \'30s\'')
    _, report = _doctor(capsys, "--dsn", pgsteady_database.dsn)
    assert "setting-statement-timeout" not in {f["id"] for f in report["findings"]}


def test_docs_configured_server_gets_none(capsys):
    """A PostgreSQL configured as the docs advise gets none of the setting-* findings."""
    settings = docs_settings()
    assert set(settings) >= {"statement_timeout", "client_connection_check_interval",
                             "tcp_keepalives_idle", "log_lock_waits"}
    who = _process.run_as()
    workdir = make_workdir(None, who, prefix="pgsteady-doctor-test-")
    server = Postgres(workdir, who=who, settings=settings)
    try:
        server.start()
        code, report = _doctor(capsys, "--dsn", server.dsn(), "--fail-on", "critical")
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    assert code == 0
    assert not {f["id"] for f in report["findings"]} & SETTING_IDS


def test_sessions_checks(pgsteady_database, capsys):
    """An idle-in-transaction session past the threshold, a blocking chain past --blocked-for,
    and unlabelled sessions are each reported with the session's pid."""
    dsn = pgsteady_database.dsn
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute("CREATE TABLE jobs (id int)")
    holder = psycopg.connect(dsn, application_name="worker@box:1")
    waiter = psycopg.connect(dsn, autocommit=True, options="-c statement_timeout=20s")
    try:
        holder.execute("LOCK TABLE jobs IN SHARE MODE")
        waiter.pgconn.send_query(b"INSERT INTO jobs VALUES (1)")  # waits, unlabelled
        time.sleep(1.2)
        _, report = _doctor(capsys, "--dsn", dsn, "--idle-in-transaction", "1s",
                            "--blocked-for", "1s")
    finally:
        holder.close()
        waiter.close()
    found = {f["id"]: f for f in report["findings"]}
    holder_pid = found["idle-in-transaction"]["evidence"]["sessions"][0]["pid"]
    assert found["idle-in-transaction"]["evidence"]["sessions"][0]["application_name"] == \
        "worker@box:1"
    assert found["blocking-chain"]["evidence"]["root"]["pid"] == holder_pid
    assert found["blocking-chain"]["evidence"]["queued_total"] == 1
    assert found["blocking-chain"]["evidence"]["queued_per_relation"] == {"public.jobs": 1}
    assert found["unlabelled-sessions"]["evidence"]["count"] >= 1


def test_invalid_index(pgsteady_database, capsys):
    """An INVALID index is reported with the DROP INDEX CONCURRENTLY that removes it."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (v int)")
        conn.execute("INSERT INTO t VALUES (1), (1)")
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("CREATE UNIQUE INDEX CONCURRENTLY t_v ON t (v)")
    _, report = _doctor(capsys, "--dsn", pgsteady_database.dsn)
    finding = next(f for f in report["findings"] if f["id"] == "invalid-index")
    assert finding["evidence"]["indexes"][0]["index"] == "public.t_v"
    assert "DROP INDEX CONCURRENTLY public.t_v" in finding["fix"]


def test_unreachable_server_exit_3_one_line_no_password():
    """Nothing listening: one line on stderr, exit 3, no traceback, no password."""
    port = _process.free_port()
    dsn = f"host=127.0.0.1 port={port} dbname=x user=u password=s3cret-pw connect_timeout=2"
    for argv in (["doctor", "--dsn", dsn], ["doctor", "--pgbouncer", dsn],
                 ["blockers", "--dsn", dsn]):
        out = subprocess.run([sys.executable, "-m", "pgsteady", *argv], capture_output=True,
                             text=True, timeout=60, check=False)
        assert out.returncode == 3, out.stderr
        assert out.stderr.count("\n") == 1, out.stderr
        assert "Traceback" not in out.stderr and "s3cret" not in out.stderr + out.stdout
        assert re.search(r"cannot connect to (PostgreSQL|PgBouncer)", out.stderr)


def test_a_server_that_never_answers_takes_the_users_connect_timeout(pgsteady_proxy,
                                                                      monkeypatch):
    """doctor, doctor --pgbouncer and blockers against a port that accepts and then says
    nothing give up after the DSN's connect_timeout (2 s) or PGCONNECT_TIMEOUT, not their own
    10 s budget: exit 3, one line."""
    pgsteady_proxy.blackhole(True)
    silent = f"host=127.0.0.1 port={pgsteady_proxy.port} dbname=x user=u"
    runs = [(["doctor", "--dsn", f"{silent} connect_timeout=2"], {}),
            (["doctor", "--pgbouncer", f"{silent} connect_timeout=2"], {}),
            (["blockers", "--dsn", f"{silent} connect_timeout=2"], {}),
            (["doctor", "--dsn", silent], {"PGCONNECT_TIMEOUT": "2"})]
    for argv, env in runs:
        start = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "pgsteady", *argv], capture_output=True,
                             text=True, timeout=60, check=False, env={**os.environ, **env})
        took = time.monotonic() - start
        assert out.returncode == 3, (argv, out.stderr)
        assert out.stderr.count("\n") == 1, out.stderr
        assert took < 7, (argv, took)  # 2 s and a Python start, not the 10 s default


def test_misdirected_dsns_exit_2(pgsteady_stack, pgsteady_database, capsys):
    """A PostgreSQL DSN given as --pgbouncer, or PgBouncer's admin console as --dsn: one line
    naming the mistake, exit 2 (the lab's own DSNs: a password here could fail its auth)."""
    lab = pgsteady_stack(pool_size=1)
    assert main(["doctor", "--pgbouncer", pgsteady_database.dsn]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "not as PgBouncer's admin console" in err
    assert main(["doctor", "--dsn", lab.admin_dsn]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "PgBouncer's admin console" in err and "--dsn" in err
    assert main(["blockers", "--dsn", lab.admin_dsn]) == 2
    capsys.readouterr()


def test_nothing_to_examine(monkeypatch, capsys):
    """No source at all: a usage error naming the options, exit 2."""
    for name in [k for k in os.environ if k.startswith("PG")]:
        monkeypatch.delenv(name)
    assert main(["doctor"]) == 2
    assert "--dsn" in capsys.readouterr().err


def test_blockers_cancel_and_refusals(pgsteady_database, capsys):
    """--cancel ends the statement and keeps the session; PostgreSQL's own processes and pids
    that do not exist are refused."""
    dsn = pgsteady_database.dsn
    sleeper = psycopg.connect(dsn, autocommit=True, application_name="sleeper@box:1")
    try:
        sleeper.pgconn.send_query(b"SELECT pg_sleep(30)")
        pid = sleeper.info.backend_pid
        assert main(["blockers", "--dsn", dsn, "--cancel", str(pid), "--yes",
                     "--yes-superuser"]) == 0
        assert f"pid {pid}: cancel sent" in capsys.readouterr().out
        sleeper.pgconn.consume_input()
        result = sleeper.pgconn.get_result()
        assert result is not None and result.error_field(ord("C")) == b"57014"  # canceled
        with psycopg.connect(dsn, autocommit=True) as conn:
            checkpointer = conn.execute("SELECT pid FROM pg_stat_activity WHERE backend_type = "
                                        "'checkpointer'").fetchone()
            alive = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                 (pid,)).fetchone()
        assert alive == (1,)
    finally:
        sleeper.close()
    assert checkpointer is not None
    assert main(["blockers", "--dsn", dsn, "--terminate", str(checkpointer[0]), "--yes"]) == 2
    assert "checkpointer" in capsys.readouterr().err
    assert main(["blockers", "--dsn", dsn, "--terminate", "999999", "--yes"]) == 1
    assert "no session with pid 999999" in capsys.readouterr().err
    assert main(["blockers", "--dsn", dsn, "--terminate", "999999", "--yes", "--json"]) == 1
    out, err = capsys.readouterr()   # with --json the error reaches stdout as JSON too
    assert json.loads(out)["error"]["exit_code"] == 1 and "999999" in err


def test_blockers_terminate_json_prints_only_the_outcome(pgsteady_database, capsys):
    """With --json, stdout is one document saying what was ended and how it went (the
    human lines go to stderr); the session is gone."""
    dsn = pgsteady_database.dsn
    victim = psycopg.connect(dsn, autocommit=True, application_name="victim@box:1")
    try:
        pid = victim.info.backend_pid
        assert main(["blockers", "--dsn", dsn, "--terminate", str(pid), "--yes",
                     "--yes-superuser", "--json"]) == 0
        out, err = capsys.readouterr()
        document = json.loads(out)
        assert document["schema_version"] == 1 and document["action"] == "terminate"
        assert document["pid"] == pid and document["result"] == "terminated"
        assert document["session"]["application_name"] == "victim@box:1"
        assert document["gone_after_s"] >= 0
        assert f"terminate pid {pid}" in err
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                (pid,)).fetchone() == (0,)
    finally:
        victim.close()


def test_doctor_session_is_labelled_and_read_only(pgsteady_database):
    """Seen from another session while it works, doctor's session is labelled
    pgsteady-doctor@host:pid and its transaction is read-only (it writes nothing)."""
    import threading

    from pgsteady.inspect.postgres import take_snapshot

    seen: list[tuple[str, str]] = []
    stop = threading.Event()

    def watch() -> None:
        with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
            while not stop.is_set() and not seen:
                row = conn.execute("SELECT application_name, query FROM pg_stat_activity "
                                   "WHERE application_name LIKE 'pgsteady-doctor@%%' AND "
                                   "query LIKE 'BEGIN%%'").fetchone()
                if row is not None:
                    seen.append(row)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for _ in range(200):  # bounded: each snapshot is a few ms
            take_snapshot(pgsteady_database.dsn)
            if seen:
                break
    finally:
        stop.set()
        watcher.join(10)
    assert seen, "never caught doctor's session at work"
    label, query = seen[0]
    assert re.fullmatch(r"pgsteady-doctor@.+:\d+", label)
    assert query.startswith("BEGIN READ ONLY")


def test_terminate_asks_on_a_terminal(pgsteady_database):
    """On a terminal, --terminate shows the session and asks: 'n' leaves it; a superuser's
    session is asked about twice, and 'y' to both ends it and says it is gone."""
    import pty

    dsn = pgsteady_database.dsn
    victim = psycopg.connect(dsn, application_name="forgotten@laptop:9")
    victim.execute("SELECT 1")  # idle in transaction
    pid = victim.info.backend_pid
    try:
        for answer, expected in (("n", "nothing done"),
                                 ("y\ny", f"pid {pid}: terminated, gone")):
            leader, follower = pty.openpty()
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "pgsteady", "blockers", "--dsn", dsn, "--terminate",
                     str(pid)], stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True)
                os.write(leader, f"{answer}\n".encode())
                out, err = proc.communicate(timeout=60)
            finally:
                os.close(leader)
                os.close(follower)
            assert proc.returncode == 0, err
            assert f"terminate pid {pid} 'forgotten@laptop:9'" in out
            assert expected in out
            assert "warning: it is a superuser session" in out
            assert (f"terminate pid {pid} anyway?" in out) == (answer != "n")
    finally:
        victim.close()


@pytest.mark.parametrize("argv", [
    ["doctor", "--dsn", "host=127.0.0.1 port=1", "--timeout", "0"],
    ["blockers", "--dsn", "host=127.0.0.1 port=1", "--timeout", "0"],
    ["doctor", "--pgbouncer", "host=127.0.0.1 port=1 dbname=pgbouncer", "--samples", "61"],
], ids=["doctor-timeout-0", "blockers-timeout-0", "doctor-samples-61"])
def test_impossible_limits_are_usage_errors(argv, capsys):
    """--timeout 0 (was a QueryCanceled failure, exit 1) and --samples above 60 (was silently
    60, about a minute): exit 2 in one line naming the option, before connecting."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and argv[-2] in err
