"""Doctor's checks on hand-built snapshots: thresholds and evidence, no server needed."""

from __future__ import annotations

from dataclasses import replace

from pgsteady.inspect.findings import Thresholds, at_least, postgres_findings
from pgsteady.inspect.findings_pgbouncer import pgbouncer_findings
from pgsteady.inspect.pgbouncer import BouncerSnapshot, Database, Pool, Sample
from pgsteady.inspect.postgres import (
    PostgresSnapshot,
    PreparedXact,
    Session,
    Setting,
    SlotHold,
)

SAFE = {
    "statement_timeout": "60000", "lock_timeout": "5000",
    "idle_in_transaction_session_timeout": "60000", "client_connection_check_interval": "10000",
    "tcp_keepalives_idle": "60", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "6",
    "log_lock_waits": "on", "log_min_duration_statement": "1000", "max_connections": "100",
    "superuser_reserved_connections": "3",
}


def _session(pid: int, **kw) -> Session:
    base = Session(pid, "app", "app", f"api@web:{pid}", "10.0.0.2", 4000, "client backend",
                   "active", 60.0, 1.0, 1.0, 1.0, None, None, None, False, "select 1")
    return replace(base, **kw)


def _snap(sessions=(), settings=None, **kw) -> PostgresSnapshot:
    values = {**SAFE, **(settings or {})}
    return PostgresSnapshot(
        dsn="host=db", version_num=150000, version="15.18", database="app", user="app",
        superuser=False, own_pid=1, taken_at=0.0, elapsed=0.01, connect_seconds=0.005,
        sessions=tuple(sessions), locks=(),
        settings={n: Setting(n, v, v, "", "configuration file", None, None)
                  for n, v in values.items()},
        **{"overrides": (), "slots": (), "prepared": (), "invalid_indexes": (), **kw})


def _ids(findings) -> dict[str, str]:
    return {f.id: f.severity for f in findings}


def test_a_quiet_well_configured_server_has_no_findings():
    """Safe settings, a few labelled short sessions: nothing to report."""
    assert postgres_findings(_snap([_session(10), _session(11)])) == []


def test_long_idle_and_xmin_holders():
    """A 2 h transaction idle in transaction for 1 h holding an old snapshot is reported as
    long-transaction, idle-in-transaction and xmin-horizon, naming its pid and label."""
    old = _session(42, application_name="dashboard-logs@api-7:1", state="idle in transaction",
                   xact_age=7200.0, state_age=3600.0, xmin_age_xids=5_000_000)
    found = {f.id: f for f in postgres_findings(_snap([old, _session(43)]))}
    assert found["long-transaction"].evidence["sessions"][0]["pid"] == 42
    assert found["idle-in-transaction"].evidence["sessions"][0]["pid"] == 42
    xmin = found["xmin-horizon"]
    assert "pid 42 'dashboard-logs@api-7:1'" in xmin.title and "2h00m" in xmin.title
    assert "pg_terminate_backend(42)" in xmin.fix


def test_xmin_held_by_a_prepared_transaction_or_an_inactive_slot():
    """A prepared transaction older than the threshold and an inactive slot are named."""
    snap = _snap(prepared=(PreparedXact("tx-1", "app", "app", 7200.0, 900),),
                 slots=(SlotHold("old_replica", "physical", False, None, "", 10_000, None),))
    xmin = next(f for f in postgres_findings(snap) if f.id == "xmin-horizon")
    kinds = [h["kind"] for h in xmin.evidence["holders"]]
    assert kinds == ["prepared transaction", "replication slot"]
    assert "COMMIT PREPARED 'tx-1'" in xmin.fix


def test_connection_use_thresholds():
    """70 % of usable slots is a warning, 90 % critical; reserved slots are not usable."""
    def use(n: int) -> dict[str, str]:
        sessions = [_session(100 + i) for i in range(n - 1)]  # + doctor's own
        return _ids(postgres_findings(_snap(sessions)))
    assert "connections-saturated" not in use(60)
    assert use(68)["connections-saturated"] == "warning"  # 68 / 97
    assert use(88)["connections-saturated"] == "critical"  # 88 / 97


def test_reserved_slots():
    """No reserved slots is a warning; superuser applications make the reserve useless (info)."""
    assert _ids(postgres_findings(_snap(settings={"superuser_reserved_connections": "0"})))[
        "no-reserved-slots"] == "warning"
    supers = [_session(i, superuser=True) for i in range(10, 14)]
    assert _ids(postgres_findings(_snap(supers)))["no-reserved-slots"] == "info"


def test_settings_each_reported_and_severity_order():
    """Each risky setting gets its own id; critical before warning before info."""
    snap = _snap(settings={"statement_timeout": "0", "tcp_keepalives_idle": "7200",
                           "log_lock_waits": "off"})
    found = postgres_findings(snap)
    assert _ids(found) == {"setting-statement-timeout": "warning",
                           "setting-tcp-keepalives": "warning",
                           "setting-log-lock-waits": "warning"}
    assert at_least(found, "critical") == []


def _pool(waiting: int, login: int, ready: int, active: int = 0, maxwait: float = 0.0) -> Pool:
    return Pool("app", "app", 0, waiting, active, ready - active, 0, 0, login, maxwait,
                "transaction")


def _bouncer(series: list[Pool], **config: str) -> BouncerSnapshot:
    samples = tuple(Sample(float(i), (p,), {}, {}, {}) for i, p in enumerate(series))
    cfg = {"pool_mode": "transaction", "query_wait_timeout": "120", "min_pool_size": "0",
           "max_prepared_statements": "200", **config}
    db = Database("app", 4, 0, 0, None, 0, 0, False, False)
    return BouncerSnapshot("host=pgb", "PgBouncer 1.23.1", cfg, (db,), samples, 1.0, 0.0)


def test_refill_stuck_versus_refilling():
    """Login pending, no new server, waiting clients growing: stuck (critical). A pool that
    gains servers while clients wait is refilling, not stuck."""
    stuck = _bouncer([_pool(3, 1, 0), _pool(9, 1, 0), _pool(15, 0, 0)])
    assert _ids(pgbouncer_findings(stuck, None))["pgbouncer-refill-stuck"] == "critical"
    refilling = _bouncer([_pool(3, 1, 0), _pool(5, 1, 1), _pool(6, 1, 2)])
    assert "pgbouncer-refill-stuck" not in _ids(pgbouncer_findings(refilling, None))
    one = _bouncer([_pool(30, 1, 0)])
    assert "pgbouncer-refill-stuck" not in _ids(pgbouncer_findings(one, None))


def test_pool_saturated_and_wait_settings():
    """All servers busy with clients waiting is pool-saturated; query_wait_timeout 0, or
    longer than the app deadline, is reported; a slow connect with min_pool_size 0 too."""
    busy = _bouncer([_pool(4, 0, 4, active=4, maxwait=2.5)], query_wait_timeout="0")
    found = _ids(pgbouncer_findings(busy, None, Thresholds()))
    assert found["pgbouncer-pool-saturated"] == "warning"
    assert found["pgbouncer-query-wait-timeout"] == "warning"
    quiet = _bouncer([_pool(0, 0, 4)])
    th = Thresholds(app_deadline=0.05)
    found = _ids(pgbouncer_findings(quiet, None, th, connect_latency=0.06))
    assert found == {"pgbouncer-query-wait-timeout": "warning",
                     "pgbouncer-min-pool-size": "warning"}
    assert _ids(pgbouncer_findings(quiet, None, th, connect_latency=0.002)) == {
        "pgbouncer-query-wait-timeout": "warning"}


def test_prepared_statements_only_without_support():
    """Transaction mode without max_prepared_statements (PgBouncer < 1.21) is reported; with
    it set, or in session mode, it is not."""
    old = _bouncer([_pool(0, 0, 1)], max_prepared_statements="")
    old = replace(old, config={k: v for k, v in old.config.items()
                               if k != "max_prepared_statements"})
    assert "pgbouncer-prepared-statements" in _ids(pgbouncer_findings(old, None))
    assert "pgbouncer-prepared-statements" not in _ids(
        pgbouncer_findings(_bouncer([_pool(0, 0, 1)]), None))
    session = _bouncer([_pool(0, 0, 1)], pool_mode="session", max_prepared_statements="0")
    assert "pgbouncer-prepared-statements" not in _ids(pgbouncer_findings(session, None))


def test_gauges_for_an_exporter():
    """The snapshot's gauges: longest transaction, idle-in-transaction count, xmin age."""
    snap = _snap([_session(5, xact_age=30.0, xmin_age_xids=10),
                  _session(6, state="idle in transaction", xact_age=12.0)],
                 prepared=(PreparedXact("tx", "app", "app", 99.0, 5),))
    assert snap.longest_transaction == 30.0
    assert snap.idle_in_transaction == 1
    assert snap.xmin_horizon_age == 99.0
    assert _snap().xmin_horizon_age == 0.0
