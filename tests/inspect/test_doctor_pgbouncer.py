"""doctor on a real PgBouncer: a pool stuck refilling behind a black hole, its settings."""

from __future__ import annotations

import json
import threading
import time

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgsteady.cli import main


def _doctor(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["doctor", "--json", *argv])
    out, err = capsys.readouterr()
    assert out, err
    return code, json.loads(out)


def _ids(report: dict) -> dict[str, str]:
    return {f["id"]: f["severity"] for f in report["findings"]}


def test_refill_stuck_behind_a_black_hole(pgsteady_stack, pgsteady_database, capsys):
    """New server connections vanish at the proxy while clients keep arriving: doctor reports
    pgbouncer-refill-stuck (critical); the same pool, healthy and busy, does not."""
    lab = pgsteady_stack(pool_size=2, proxy=True,
                         pgbouncer_settings={"server_connect_timeout": 5})
    dsn = lab.pooled_dsn(pgsteady_database.name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT 1")
    code, healthy = _doctor(capsys, "--pgbouncer", lab.admin_dsn, "--samples", "2",
                            "--interval", "0.2s")
    assert "pgbouncer-refill-stuck" not in _ids(healthy)

    lab.pgbouncer.admin("KILL " + pgsteady_database.name)  # drop its servers: a cold pool
    lab.pgbouncer.admin("RESUME " + pgsteady_database.name)  # KILL also pauses it
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
        for _ in range(40):  # one new client every 150 ms until doctor is done, bounded
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
        code, stuck = _doctor(capsys, "--pgbouncer", lab.admin_dsn, "--samples", "3",
                              "--interval", "0.5s")
    finally:
        stop.set()
        arrivals.join(5)
        lab.proxy.blackhole(False)
        lab.proxy.reset()  # abort the swallowed login: PgBouncer retries at once
    assert code == 1
    assert _ids(stuck)["pgbouncer-refill-stuck"] == "critical"
    finding = next(f for f in stuck["findings"] if f["id"] == "pgbouncer-refill-stuck")
    waiting = [s["cl_waiting"] for s in finding["evidence"]["samples"]]
    assert waiting[-1] > waiting[0] > 0
    assert stuck["findings"][0]["severity"] == "critical"
    for t in clients:
        t.join(15)  # once the hole closes, the pool refills and every client gets through
    assert not any(t.is_alive() for t in clients)


def test_pgbouncer_settings_findings(pgsteady_stack, pgsteady_database, capsys):
    """A cold pool (min_pool_size 0) behind a 50 ms connect with a 50 ms app deadline, the
    default 120 s query_wait_timeout and transaction pooling on 1.18 are each reported; after
    a RELOAD with a warm pool and a short wait limit those two findings go away."""
    lab = pgsteady_stack(pool_size=2, proxy=True, connect_delay=0.05)
    assert lab.proxy is not None
    params = conninfo_to_dict(lab.direct_dsn(pgsteady_database.name))
    slow_pg = make_conninfo("", **{**params, "port": str(lab.proxy.port)})  # via the proxy
    with psycopg.connect(lab.pooled_dsn(pgsteady_database.name), autocommit=True) as conn:
        conn.execute("SELECT 1")
    args = ("--dsn", slow_pg, "--pgbouncer", lab.admin_dsn, "--samples", "1",
            "--app-deadline", "50ms")
    _, report = _doctor(capsys, *args)
    ids = _ids(report)
    assert ids["pgbouncer-query-wait-timeout"] == "warning"
    assert ids["pgbouncer-min-pool-size"] == "warning"
    assert ids["pgbouncer-prepared-statements"] == "warning"
    assert report["checked"]["postgres"]["connect_s"] >= 0.05
    assert report["checked"]["pgbouncer"]["version"].startswith("PgBouncer")

    lab.pgbouncer.reload(min_pool_size=2, query_wait_timeout=0.05)
    _, report = _doctor(capsys, *args)
    ids = _ids(report)
    assert "pgbouncer-query-wait-timeout" not in ids
    assert "pgbouncer-min-pool-size" not in ids


def test_server_login_retry_is_reported_until_it_is_short(pgsteady_stack, pgsteady_database,
                                                          capsys):
    """PgBouncer's default server_login_retry (15 s) is a finding with the advice to set 1;
    after a RELOAD with 1 it is gone."""
    lab = pgsteady_stack(pool_size=2, pgbouncer_settings={"server_login_retry": 15})
    args = ("--dsn", lab.direct_dsn(pgsteady_database.name), "--pgbouncer", lab.admin_dsn,
            "--samples", "1")
    _, report = _doctor(capsys, *args)
    [finding] = [f for f in report["findings"] if f["id"] == "pgbouncer-server-login-retry"]
    assert finding["severity"] == "warning"
    assert finding["evidence"]["server_login_retry_s"] == 15
    assert "server_login_retry = 1" in finding["fix"]
    lab.pgbouncer.reload(server_login_retry=1)
    _, report = _doctor(capsys, *args)
    assert "pgbouncer-server-login-retry" not in _ids(report)
