"""Doctor's PgBouncer checks: a pool stuck refilling, connections destroyed by leaving
clients, dropped cancels, saturated pools, and the settings seed 000 names.

Pure functions of a :class:`~pgsteady.inspect.pgbouncer.BouncerSnapshot` and a
:class:`~pgsteady.inspect.pgbouncer.LogScan`, like :mod:`.findings`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pgsteady._docs import POOL_DRAIN
from pgsteady.inspect.findings import Finding, Severity, Thresholds, rank
from pgsteady.inspect.pgbouncer import BouncerSnapshot, LogScan, Pool

ADMIN_DB = "pgbouncer"


def pgbouncer_findings(snap: BouncerSnapshot | None, log: LogScan | None,
                       th: Thresholds | None = None, *,
                       connect_latency: float | None = None) -> list[Finding]:
    """Every PgBouncer check that the given sources allow, most severe first.

    ``connect_latency``: seconds a new PostgreSQL connection took (doctor measures its own),
    which decides whether ``min_pool_size = 0`` makes a cold start risky.
    """
    th = th or Thresholds()
    found: list[Finding] = []
    if snap is not None:
        found += _refill_stuck(snap)
        found += _pool_saturated(snap, th)
        found += _query_wait_timeout(snap, th)
        found += _min_pool_size(snap, th, connect_latency)
        found += _prepared_statements(snap)
        found += _server_login_retry(snap, th)
    if log is not None:
        found += _log_findings(log, th)
    return sorted(found, key=rank)


def _series_evidence(series: list[Pool], snap: BouncerSnapshot) -> dict[str, Any]:
    return {
        "pool": f"{series[0].database}/{series[0].user}",
        "samples": [{"at_s": round(s.elapsed, 2), "cl_waiting": p.cl_waiting,
                     "cl_active": p.cl_active, "sv_login": p.sv_login,
                     "servers_ready": p.servers_ready, "maxwait_s": round(p.maxwait, 3)}
                    for s, p in zip(snap.samples, series, strict=False)],
    }


def _refill_stuck(snap: BouncerSnapshot) -> list[Finding]:
    found = []
    for (database, user), series in snap.pool_series().items():
        if len(series) < 2:
            continue
        first, last = series[0], series[-1]
        logging_in = any(p.sv_login > 0 for p in series)
        no_new_server = all(p.servers_ready <= first.servers_ready for p in series)
        waiting_grows = (all(p.cl_waiting > 0 for p in series)
                         and last.cl_waiting > first.cl_waiting)
        if not (logging_in and no_new_server and waiting_grows):
            continue
        span = snap.samples[-1].elapsed - snap.samples[0].elapsed
        found.append(Finding(
            "pgbouncer-refill-stuck", "critical",
            f"pool {database}/{user} is stuck refilling: a server login is pending, no server "
            f"connection came up in {span:.1f}s, and waiting clients grew "
            f"{first.cl_waiting} -> {last.cl_waiting}",
            {**_series_evidence(series, snap),
             "server_connect_timeout": snap.setting("server_connect_timeout"),
             "server_login_retry": snap.setting("server_login_retry")},
            "PgBouncer cannot open connections to PostgreSQL (one attempt at a time): check the "
            "network and PostgreSQL from PgBouncer's host (psql \"host=<server> ...\"), its "
            "max_connections and auth; meanwhile clients pile up until query_wait_timeout. "
            "Keep a warm pool (min_pool_size) and never let deadlines close client "
            f"connections (the pool-drain outage, {POOL_DRAIN})"))
    return found


def _pool_size(snap: BouncerSnapshot, database: str) -> int:
    db = snap.database(database)
    if db is not None and db.pool_size > 0:
        return db.pool_size
    try:
        return int(snap.setting("default_pool_size", "20"))
    except ValueError:
        return 20


def _pool_saturated(snap: BouncerSnapshot, th: Thresholds) -> list[Finding]:
    found = []
    for (database, user), series in snap.pool_series().items():
        size = _pool_size(snap, database)
        busy = [p for p in series if p.cl_waiting > 0 and p.sv_active >= th.pool_busy * size]
        slow = [p for p in series if p.maxwait > th.pool_maxwait]
        if not busy and not slow:
            continue
        worst = max(series, key=lambda p: (p.maxwait, p.cl_waiting))
        found.append(Finding(
            "pgbouncer-pool-saturated", "warning",
            f"pool {database}/{user} is saturated: {worst.sv_active} of {size} server "
            f"connections active, {worst.cl_waiting} clients waiting, the oldest for "
            f"{worst.maxwait:.1f}s",
            {**_series_evidence(series, snap), "pool_size": size},
            f"find what holds the servers (SHOW SERVERS; pgsteady blockers on PostgreSQL); if "
            f"the load is real, raise pool_size for {database} within PostgreSQL's "
            f"max_connections: [databases] {database} = ... pool_size={size * 2}"))
    return found


def _seconds(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _query_wait_timeout(snap: BouncerSnapshot, th: Thresholds) -> list[Finding]:
    value = _seconds(snap.setting("query_wait_timeout", "120"))
    if value is None:
        return []
    deadline = th.app_deadline
    if value == 0:
        title = "query_wait_timeout = 0: clients queue in PgBouncer forever"
    elif deadline is not None and value > deadline:
        title = (f"query_wait_timeout = {value:g}s is longer than the application's "
                 f"{deadline * 1000:.0f} ms deadline: clients give up first, and closing "
                 f"costs a server connection")
    else:
        return []
    wanted = f"{deadline:g}" if deadline is not None else "5"
    return [Finding(
        "pgbouncer-query-wait-timeout", "warning", title,
        {"query_wait_timeout_s": value, "app_deadline_s": deadline},
        f"query_wait_timeout = {wanted}  # pgbouncer.ini, then RELOAD; PgBouncer checks it "
        f"about 3 times a second, so sub-second values are approximate")]


def _min_pool_size(snap: BouncerSnapshot, th: Thresholds,
                   latency: float | None) -> list[Finding]:
    if latency is None or th.app_deadline is None or latency < th.app_deadline / 2:
        return []
    cold = [d.name for d in snap.databases if d.name != ADMIN_DB and d.min_pool_size == 0]
    global_min = snap.setting("min_pool_size", "0")
    if not cold or global_min not in ("0", ""):
        return []
    return [Finding(
        "pgbouncer-min-pool-size", "warning",
        f"min_pool_size = 0 while a new server connection takes {latency * 1000:.0f} ms "
        f"against a {th.app_deadline * 1000:.0f} ms deadline: a cold pool collapses under "
        f"its first burst",
        {"databases": cold, "connect_latency_s": round(latency, 4),
         "app_deadline_s": th.app_deadline},
        "min_pool_size = <your pool_size>  # pgbouncer.ini, then RELOAD (keeps the pool warm; "
        "needs a fixed user in [databases] or a connected client)")]


def _prepared_statements(snap: BouncerSnapshot) -> list[Finding]:
    modes = {snap.setting("pool_mode")} | {d.pool_mode for d in snap.databases
                                            if d.name != ADMIN_DB and d.pool_mode}
    if "transaction" not in modes:
        return []
    limit = snap.setting("max_prepared_statements", "")
    if limit not in ("", "0"):
        return []
    supported = "max_prepared_statements" in snap.config
    return [Finding(
        "pgbouncer-prepared-statements", "warning",
        "transaction pooling without prepared-statement support: drivers must not prepare "
        "(psycopg prepares after 5 runs by default)",
        {"pool_mode": "transaction", "version": snap.version,
         "max_prepared_statements": limit or "not supported (PgBouncer < 1.21)"},
        ("max_prepared_statements = 200  # pgbouncer.ini, then RELOAD" if supported else
         "in every client: psycopg prepare_threshold=None; asyncpg statement_cache_size=0; "
         "pgx default_query_exec_mode=exec; or upgrade to PgBouncer >= 1.21 and set "
         "max_prepared_statements = 200"))]


def _server_login_retry(snap: BouncerSnapshot, th: Thresholds) -> list[Finding]:
    """After a failed server login (PostgreSQL restarting, max_connections full) PgBouncer
    waits ``server_login_retry`` before its next try: with the 15 s default, nothing is
    answered through it for up to 15 s after PostgreSQL is back (~13 s measured)."""
    value = _seconds(snap.setting("server_login_retry"))  # not shown: nothing to judge
    if value is None or value <= th.server_login_retry:
        return []
    return [Finding(
        "pgbouncer-server-login-retry", "warning",
        f"server_login_retry = {value:g}s: after PostgreSQL restarts or refuses a login, "
        f"PgBouncer answers nothing for up to {value:g}s after it is back",
        {"server_login_retry_s": value, "advised_at_most_s": th.server_login_retry},
        "server_login_retry = 1  # pgbouncer.ini, then RELOAD: PgBouncer tries a failed "
        "server login again after 1 s, so service returns within about a second of "
        "PostgreSQL (one attempt a second is no load for the server)")]


def _log_findings(log: LogScan, th: Thresholds) -> list[Finding]:
    found = []
    end = (datetime.fromtimestamp(log.last_epoch, UTC).isoformat(timespec="seconds")
           if log.last_epoch is not None else None)
    recent = sorted(log.per_minute.items())[-10:]
    common = {"log": log.path, "log_ends_at": end, "last_minute": dict(log.last_minute)}
    not_ready = log.last_minute.get("not_ready", 0)
    if not_ready > th.not_ready_warning:
        severity: Severity = "critical" if not_ready > th.not_ready_critical else "warning"
        peak_at, peak = log.peak("not_ready")
        found.append(Finding(
            "pgbouncer-not-ready-closures", severity,
            f"{not_ready} server connections closed in the log's last minute because their "
            f"client left while queued (client disconnect while server was not ready)",
            {**common, "peak_per_minute": peak, "peak_minute": _iso(peak_at),
             "per_minute": [{"minute": _iso(m), "not_ready": c.get("not_ready", 0),
                             "server_opened": c.get("server_opened", 0)} for m, c in recent]},
            "clients are closing connections on a deadline while queued, which destroys a "
            "server connection each time: let the deadline end the wait, not the connection "
            "(pgsteady.Database; pgx: do not close on context cancel); set query_wait_timeout "
            "near the app deadline; alert on this count"))
    dropped = log.last_minute.get("cancel_idle", 0)
    if dropped > th.dropped_cancels_warning:
        found.append(Finding(
            "pgbouncer-dropped-cancels", "warning",
            f"{dropped} cancel requests dropped in the log's last minute (cancel request for "
            f"idle client): clients cancel queries that are still queued, which does nothing",
            {**common, "per_minute": [{"minute": _iso(m), "cancel_idle": c.get("cancel_idle", 0)}
                                      for m, c in recent]},
            "a cancel cannot reach a query still queued in PgBouncer; the client then usually "
            "closes its connection (see pgbouncer-not-ready-closures): end the caller's wait "
            "without cancelling or closing"))
    return found


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="minutes")
