"""The embedded cluster: real PostgreSQL, real PgBouncer, the fault proxy between them."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from pgsteady.lab.cluster import Cluster
from pgsteady.lab.wire import WireConnection


def test_query_runs_through_pgbouncer(pgsteady_stack):
    """A query sent to PgBouncer's port is answered by the PostgreSQL behind it."""
    cluster = pgsteady_stack(pool_size=2)
    with psycopg.connect(cluster.pooled_dsn(), prepare_threshold=None) as conn:
        port = conn.execute("select current_setting('port')::int").fetchone()[0]
    assert port == cluster.postgres.port
    assert cluster.pgbouncer.port != cluster.postgres.port


def test_admin_console_answers_show_pools(pgsteady_stack):
    """SHOW POOLS on the admin console returns dict rows with the pool's columns."""
    cluster = pgsteady_stack(pool_size=3)
    with psycopg.connect(cluster.pooled_dsn(), prepare_threshold=None) as conn:
        conn.execute("select 1")
        pools = [p for p in cluster.pgbouncer.admin("SHOW POOLS") if p["database"] == "postgres"]
    assert len(pools) == 1
    assert {"cl_active", "cl_waiting", "sv_active", "sv_idle", "sv_login"} <= pools[0].keys()
    config = {r["key"]: r["value"] for r in cluster.pgbouncer.admin("SHOW CONFIG")}
    assert config["default_pool_size"] == "3"
    assert config["pool_mode"] == "transaction"


def test_connect_delay_shows_in_new_server_connections(pgsteady_stack):
    """A 300 ms proxy delay makes PgBouncer's first server connection take >= 300 ms;
    a query on the already open server connection does not pay it again."""
    cluster = pgsteady_stack(pool_size=1, proxy=True, connect_delay=0.3)
    start = time.monotonic()  # PgBouncer opens its first server connection at client login
    with psycopg.connect(cluster.pooled_dsn(), prepare_threshold=None) as conn:
        conn.execute("select 1")
        first = time.monotonic() - start
        start = time.monotonic()
        conn.execute("select 1")
        second = time.monotonic() - start
    assert first >= 0.3
    assert second < 0.15
    assert cluster.proxy.stats().first_packet["startup"] == 1


def test_stall_holds_a_running_query(pgsteady_stack):
    """A 500 ms stall of the proxy holds an in-flight query for at least the stall."""
    cluster = pgsteady_stack(pool_size=1, proxy=True)
    with psycopg.connect(cluster.pooled_dsn(), prepare_threshold=None) as conn:
        conn.execute("select 1")  # the server connection exists before the stall
        cluster.proxy.stall(0.5)
        start = time.monotonic()
        conn.execute("select 1")
        held = time.monotonic() - start
    assert 0.45 <= held < 3.0


def test_blackhole_makes_a_connection_attempt_time_out(pgsteady_proxy, pgsteady_postgres):
    """While black-holed, the proxy accepts but never answers: connect_timeout fires."""
    pgsteady_proxy.blackhole(True)
    dsn = pgsteady_postgres.dsn(port=pgsteady_proxy.port)
    start = time.monotonic()
    with pytest.raises(psycopg.OperationalError, match="timeout"):
        psycopg.connect(dsn, connect_timeout=2)
    assert time.monotonic() - start >= 1.9
    pgsteady_proxy.blackhole(False)
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
    assert pgsteady_proxy.stats().blackholed >= 1


def test_reset_closes_every_connection(pgsteady_proxy, pgsteady_postgres):
    """reset() aborts live connections; new ones still work afterwards."""
    dsn = pgsteady_postgres.dsn(port=pgsteady_proxy.port)
    with psycopg.connect(dsn) as conn:
        conn.execute("select 1")
        pgsteady_proxy.reset()
        time.sleep(0.1)
        with pytest.raises(psycopg.OperationalError):
            conn.execute("select 1")
    with psycopg.connect(dsn) as conn:
        assert conn.execute("select 2").fetchone() == (2,)


def test_seed_step_2_cancel_dropped_then_server_connection_destroyed(pgsteady_stack):
    """Seed 000 step 2: with pool_size 1, a queued client's cancel is dropped ("cancel request
    for idle client") and its close destroys a server connection ("not ready")."""
    cluster = pgsteady_stack(pool_size=1, proxy=True)
    reader = cluster.pgbouncer.log_reader()

    async def scenario() -> None:
        port = cluster.pgbouncer.port
        holder = await WireConnection.connect("127.0.0.1", port, user="postgres",
                                              dbname="postgres", password=cluster.pgbouncer.password)
        queued = await WireConnection.connect("127.0.0.1", port, user="postgres",
                                              dbname="postgres", password=cluster.pgbouncer.password)
        holder.send_query("select pg_sleep(1.5)")
        await asyncio.sleep(0.2)
        queued.send_query("select 1")  # parked by PgBouncer: the only server is busy
        await asyncio.sleep(0.2)
        await queued.cancel()
        await asyncio.sleep(0.1)
        queued.close()
        await holder.read_result()
        holder.close()

    asyncio.run(scenario())
    time.sleep(0.3)  # PgBouncer writes its log lines asynchronously
    counts = reader.counts().total
    assert counts["cancel_idle"] == 1
    assert counts["not_ready"] == 1


def test_cluster_stops_everything_and_removes_its_directory():
    """After the context manager exits, the servers are gone and the temp dir removed."""
    with Cluster(pool_size=1, proxy=True) as cluster:
        workdir = cluster.dir
        procs = [cluster.postgres._proc, cluster.pgbouncer._proc]
        assert workdir.exists()
    assert not workdir.exists()
    assert all(p is not None and p.poll() is not None for p in procs)
    assert cluster.postgres is None and cluster.pgbouncer is None


def test_cluster_stops_on_error_inside_the_block():
    """An exception inside the block still stops the servers and removes the directory."""
    with pytest.raises(RuntimeError), Cluster(pool_size=1) as cluster:
        workdir = cluster.dir
        proc = cluster.postgres._proc
        raise RuntimeError("boom")
    assert not workdir.exists()
    assert proc.poll() is not None


def test_proxy_process_applies_faults_like_the_thread_proxy(pgsteady_stack):
    """The child-process proxy delays new connections, stalls and counts like the in-thread one."""
    cluster = pgsteady_stack(pool_size=1, proxy=True, connect_delay=0.2, proxy_process=True)
    start = time.monotonic()
    with psycopg.connect(cluster.pooled_dsn(), prepare_threshold=None) as conn:
        conn.execute("select 1")
        assert time.monotonic() - start >= 0.2
        cluster.proxy.stall(0.3)
        start = time.monotonic()
        conn.execute("select 1")
        assert time.monotonic() - start >= 0.25
    stats = cluster.proxy.stats()
    assert stats.first_packet["startup"] == 1
    assert [kind for _, kind in cluster.proxy.events()] == ["startup"]


def test_durable_keeps_every_acknowledged_commit_through_an_immediate_stop():
    """The lab's PostgreSQL runs with fsync and synchronous_commit off; durable=True turns
    them on, and 300 acknowledged single-row commits all survive an immediate stop."""
    import shutil

    from pgsteady.lab import _process
    from pgsteady.lab._workdir import make_workdir
    from pgsteady.lab.cluster import Postgres

    who = _process.run_as()
    workdir = make_workdir(None, who, prefix="pgsteady-test-")
    fast = Postgres(workdir)
    assert fast.settings["fsync"] == "off" and fast.settings["synchronous_commit"] == "off"
    server = Postgres(workdir, who=who, durable=True, settings={"max_connections": 20})
    assert "fsync" not in server.settings and "synchronous_commit" not in server.settings
    assert server.settings["max_connections"] == 20
    server.start()
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            assert conn.execute("show fsync").fetchone() == ("on",)
            assert conn.execute("show synchronous_commit").fetchone() == ("on",)
            conn.execute("create table t (id int)")
            for i in range(300):
                conn.execute("insert into t values (%s)", (i,))
        server.stop(mode="immediate")
        server.start()
        with psycopg.connect(server.dsn()) as conn:
            assert conn.execute("select count(*) from t").fetchone() == (300,)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
