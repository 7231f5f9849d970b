"""The exporter on real servers: seed 002's lock queue, a PgBouncer stuck refilling, and a
PostgreSQL that never answers, each read within the scrape's deadline."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import psycopg
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from psycopg.conninfo import conninfo_to_dict
from test_doctor_seed import QUEUED, ROOT_LABEL, seed_scene  # noqa: F401  (a fixture)

from pgsteady.cli import main
from pgsteady.inspect.exporter import Exporter, ExporterCollector

PGSTEADY = [sys.executable, "-m", "pgsteady"]


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _scrape_text(exporter: Exporter) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ExporterCollector(exporter))
    return generate_latest(registry).decode()


def test_scrape_during_the_seed_002_scene(seed_scene):  # noqa: F811
    """A scrape while the ALTER waits behind the dashboard read shows the queue on orgs
    (>= 20) and the reader's application_name as the blocking root, in under a second."""
    exporter = Exporter(seed_scene["dsn"], timeout=3.0)
    try:
        start = time.monotonic()
        samples = _samples(_scrape_text(exporter))
        elapsed = time.monotonic() - start
    finally:
        exporter.close()
    assert elapsed < 2.0
    assert samples[("pgsteady_up", (("source", "postgres"),))] == 1
    assert samples[("pgsteady_lock_queue_length", (("relation", "public.orgs"),))] >= QUEUED
    roots = {dict(labels)["application_name"]: value for (name, labels), value
             in samples.items() if name == "pgsteady_blocking_root_seconds"}
    assert set(roots) == {ROOT_LABEL}
    assert roots[ROOT_LABEL] > 0
    longest = {dict(labels)["application_name"] for (name, labels) in samples
               if name == "pgsteady_longest_transaction_seconds"}
    assert ROOT_LABEL in longest
    assert 0 < samples[("pgsteady_connections_used_ratio", ())] < 1


def test_refill_stuck_across_scrapes(pgsteady_stack, pgsteady_database):
    """New server connections vanish at the proxy while clients wait in PgBouncer: the second
    scrape shows refill_stuck_seconds > 0 and waiting clients; once healthy it is 0 again."""
    lab = pgsteady_stack(pool_size=2, proxy=True,
                         pgbouncer_settings={"server_connect_timeout": 5})
    dsn = lab.pooled_dsn(pgsteady_database.name)
    exporter = Exporter(pgbouncer=lab.admin_dsn, timeout=3.0)
    key = {"database": pgsteady_database.name, "user": conninfo_to_dict(dsn)["user"]}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT 1")  # the pool exists
    lab.pgbouncer.admin("KILL " + pgsteady_database.name)  # a cold pool
    lab.pgbouncer.admin("RESUME " + pgsteady_database.name)
    lab.proxy.blackhole(True)
    stop = threading.Event()
    clients: list[threading.Thread] = []

    def client() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=20) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            pass  # PgBouncer stopped at teardown

    def arrive() -> None:
        for _ in range(30):  # bounded arrivals, one every 150 ms
            if stop.is_set():
                return
            t = threading.Thread(target=client, daemon=True)
            t.start()
            clients.append(t)
            time.sleep(0.15)

    arrivals = threading.Thread(target=arrive)
    arrivals.start()
    try:
        time.sleep(0.3)
        first = exporter.scrape()
        time.sleep(1.0)
        second = exporter.scrape()
    finally:
        stop.set()
        arrivals.join(5)
        lab.proxy.blackhole(False)
        lab.proxy.reset()
    try:
        assert second.up == {"pgbouncer": True}
        stuck = second.value("pgsteady_pgbouncer_refill_stuck_seconds", **key)
        assert stuck is not None and stuck >= 0.5, (first.values, second.values)
        assert (second.value("pgsteady_pgbouncer_clients_waiting", **key) or 0) > 0
        for t in clients:
            t.join(15)
        assert not any(t.is_alive() for t in clients)
        healthy = exporter.scrape()
        assert healthy.value("pgsteady_pgbouncer_refill_stuck_seconds", **key) == 0
    finally:
        exporter.close()


def test_unreachable_postgres_answers_within_the_deadline():
    """PostgreSQL accepts TCP but never answers: `pgsteady exporter` still answers /metrics
    within its 0.5 s scrape deadline (plus slack) with pgsteady_up{source="postgres"} 0, logs
    why without the password, and stops with exit 0 on SIGTERM."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # the kernel accepts; nobody ever speaks
    port = silent.getsockname()[1]
    proc = subprocess.Popen(
        [*PGSTEADY, "exporter", "--dsn",
         f"host=127.0.0.1 port={port} dbname=x user=x password=s3cret-pw",
         "--listen", "127.0.0.1:0", "--scrape-timeout", "0.5s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
        assert match, line
        url = f"http://127.0.0.1:{match[1]}/metrics"
        for _ in range(2):  # the second finds the first read still busy, and waits on it
            start = time.monotonic()
            with urllib.request.urlopen(url, timeout=10) as answer:
                assert answer.status == 200
                body = answer.read().decode()
            assert time.monotonic() - start < 1.5
            assert _samples(body)[("pgsteady_up", (("source", "postgres"),))] == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        logged = proc.stderr.read()
        assert "postgres is down" in logged and "s3cret-pw" not in logged + body
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        silent.close()


def test_bad_options_are_one_line_exit_2(capsys, tmp_path):
    """A bad --listen, a zero --interval, a zero --scrape-timeout, and an alerts config with
    an unknown key or a negative duration given to watch are usage errors."""
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("lock_queue_lenght = 5\n")
    negative = tmp_path / "negative.toml"
    negative.write_text('lock_queue_length_for = "-5s"\n')
    cases = [["watch", "--dsn", "dbname=x", "--config", str(unknown)],
             ["watch", "--dsn", "dbname=x", "--config", str(negative)],
             ["exporter", "--dsn", "dbname=x", "--listen", "localhost"],
             ["exporter", "--dsn", "dbname=x", "--scrape-timeout", "0"],
             ["watch", "--dsn", "dbname=x", "--interval", "0s"],
             ["watch", "--dsn", "dbname=x", "--interval", "-1s"],
             ["watch", "--pgbouncer-log", str(tmp_path)]]
    for argv in cases:
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err
    assert "a folder, not a file" in err  # the last case: a folder where the log file goes


def test_readme_documents_every_metric():
    """The metrics reference (docs/reference/metrics.md) has one row per exported metric, with
    its type and labels."""
    from pathlib import Path

    from pgsteady.inspect.exporter import METRICS

    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "metrics.md")
    rows = {m[1]: (m[2], m[3]) for m in re.finditer(
        r"^\| `(pgsteady_\w+)` \| (gauge|counter) \| ([^|]+) \|", page.read_text(), re.M)}
    for metric in METRICS:
        assert metric.name in rows, metric.name
        assert rows[metric.name] == (metric.kind, ", ".join(metric.labels) or "-")


NOT_READY_LINE = ("2026-11-30 20:23:09.815 UTC [2788] LOG S-0x1: postgres/postgres@127.0.0.1:"
                  "44315 closing because: client disconnect while server was not ready (age=1s)\n")
CANCEL_LINE = ("2026-11-30 20:23:08.515 UTC [2788] LOG C-0x2: (nodb)/(nouser)@127.0.0.1:53838 "
               "closing because: cancel request for idle client (age=0s)\n")


def test_log_counters_count_from_start_and_follow_rotation(tmp_path):
    """Lines already in the log are not counted; new ones are (a half-written line waits for
    its end); after the log is rotated the counters keep growing; a missing log is down."""
    path = tmp_path / "pgbouncer.log"
    path.write_text(NOT_READY_LINE * 5)
    exporter = Exporter(pgbouncer_log=path, timeout=2.0)
    try:
        def totals() -> tuple[float | None, float | None]:
            scrape = exporter.scrape()
            return (scrape.value("pgsteady_pgbouncer_not_ready_closures_total"),
                    scrape.value("pgsteady_pgbouncer_dropped_cancels_total"))

        assert totals() == (0, 0)
        with path.open("a") as f:
            f.write(NOT_READY_LINE * 3 + CANCEL_LINE + NOT_READY_LINE[:40])
        assert totals() == (3, 1)
        with path.open("a") as f:
            f.write(NOT_READY_LINE[40:])
        assert totals() == (4, 1)
        path.rename(tmp_path / "pgbouncer.log.1")
        path.write_text(NOT_READY_LINE * 2)
        assert totals() == (6, 1)
        path.unlink()
        scrape = exporter.scrape()
        assert scrape.up == {"pgbouncer_log": False} and "pgbouncer.log" in scrape.errors[
            "pgbouncer_log"]
        assert "pgsteady_pgbouncer_not_ready_closures_total" not in _scrape_text(exporter)
    finally:
        exporter.close()


def test_a_taken_port_is_one_line_exit_1(capsys):
    """--listen on a port another socket holds: one line naming it, exit 1."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code = main(["exporter", "--dsn", "dbname=x", "--listen", f"127.0.0.1:{port}"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in err and len(err.strip().splitlines()) == 1
