"""``/metrics`` for a PostgreSQL and a PgBouncer: what postgres_exporter and pgbouncer_exporter
do not say, read on each scrape from doctor's snapshots.

postgres_exporter and pgbouncer_exporter export raw counters; nobody exports "the lock queue on
orgs is 21 deep" or "PgBouncer has been stuck logging in for 30 s with clients waiting". This
collector reads :func:`~pgsteady.inspect.postgres.take_snapshot`,
:func:`~pgsteady.inspect.pgbouncer.sample` (one reading per scrape) and the new lines of
PgBouncer's log, and turns them into the metrics :mod:`.alerts` writes rules for.

Every scrape has its own deadline: each source is read on a worker thread and a source that has
not answered by then is reported as ``pgsteady_up{source} 0`` (never an HTTP 500, never a
scrape that hangs). A source still busy from an earlier scrape is waited on, not read again,
so a dead server never piles up connections. The same :class:`Scrape` feeds ``pgsteady watch``.
"""

from __future__ import annotations

import gzip
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgsteady import _http
from pgsteady._extras import needs
from pgsteady.errors import EXIT_USAGE, PgsteadyError
from pgsteady.inspect import pgbouncer as bouncer
from pgsteady.inspect import postgres
from pgsteady.settings import default_label, scrub

with needs("metrics", "the exporter (pgsteady exporter, pgsteady watch)"):
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.exposition import choose_encoder, gzip_accepted
    from prometheus_client.registry import Collector, CollectorRegistry

log = logging.getLogger("pgsteady.inspect")

SCRAPE_TIMEOUT = 3.0
TOP_LABELS = 20  # per-label series (application_name, relation) kept per metric, largest first
LOG_READ_BYTES = 8 * 1024 * 1024  # new log bytes read per scrape at most (the rest: next one)
CLOSE_WAIT = 5.0  # seconds close() waits for reads under way
#: A /metrics answer reuses a scrape that started less than this long ago (seconds): a
#: client pipelining requests, or two Prometheus servers scraping together, get one
#: PostgreSQL snapshot rather than one each. Below any scrape interval Prometheus allows in
#: practice (1 s and up), so a scrape on schedule is always fresh.
SHARE_FOR = 1.0
QUERY_CHARS = 40  # the exporter shows no query text; a little keeps the snapshot cheap
ADMIN_DB = "pgbouncer"

Labels = tuple[tuple[str, str], ...]
Values = dict[str, list[tuple[Labels, float]]]


@dataclass(frozen=True)
class MetricDef:
    """One exported metric: the README table is checked against these."""

    name: str
    kind: str  # gauge | counter
    labels: tuple[str, ...]
    help: str


METRICS: tuple[MetricDef, ...] = (
    MetricDef("pgsteady_up", "gauge", ("source",),
              "1 if the last scrape read this source (postgres, pgbouncer, pgbouncer_log) "
              "within its deadline, else 0"),
    MetricDef("pgsteady_lock_queue_length", "gauge", ("relation",),
              "sessions waiting for a table lock on the relation (an ALTER waiting behind a "
              "long query, and everything queued behind it)"),
    MetricDef("pgsteady_blocking_root_seconds", "gauge", ("application_name",),
              "how long the oldest wait behind a root blocker (blocks others, waits for "
              "nothing) has lasted"),
    MetricDef("pgsteady_longest_transaction_seconds", "gauge", ("application_name",),
              "age of the oldest open transaction of each application_name (top 20)"),
    MetricDef("pgsteady_idle_in_transaction_sessions", "gauge", (),
              "client sessions idle inside an open transaction"),
    MetricDef("pgsteady_xmin_horizon_age_seconds", "gauge", (),
              "how long the oldest snapshot or prepared transaction has held vacuum back"),
    MetricDef("pgsteady_connections_used_ratio", "gauge", (),
              "client connections / usable slots (max_connections minus reserved)"),
    MetricDef("pgsteady_connections_used", "gauge", (),
              "client connections, the exporter's own included"),
    MetricDef("pgsteady_connections_usable", "gauge", (),
              "max_connections minus superuser_reserved_connections (and reserved_connections)"),
    MetricDef("pgsteady_pgbouncer_pool_used_ratio", "gauge", ("database", "user"),
              "server connections active for clients / the pool's pool_size"),
    MetricDef("pgsteady_pgbouncer_clients_waiting", "gauge", ("database", "user"),
              "clients waiting for a server connection (cl_waiting)"),
    MetricDef("pgsteady_pgbouncer_clients_active", "gauge", ("database", "user"),
              "clients linked to a server connection or idle (cl_active)"),
    MetricDef("pgsteady_pgbouncer_servers", "gauge", ("database", "user", "state"),
              "server connections by state: active, idle, used, tested, login"),
    MetricDef("pgsteady_pgbouncer_max_wait_seconds", "gauge", ("database", "user"),
              "how long the oldest waiting client has waited (maxwait)"),
    MetricDef("pgsteady_pgbouncer_refill_stuck_seconds", "gauge", ("database", "user"),
              "how long a server login has been pending while clients wait and no server "
              "connection came up, across scrapes (the pool drain); 0 when not stuck"),
    MetricDef("pgsteady_pgbouncer_not_ready_closures_total", "counter", (),
              "server connections closed because their client left while the server was not "
              "ready (log lines since the exporter started)"),
    MetricDef("pgsteady_pgbouncer_dropped_cancels_total", "counter", (),
              "cancel requests PgBouncer dropped because the client was still queued (log "
              "lines since the exporter started)"),
)


@dataclass(frozen=True)
class Scrape:
    """One collection: the metric values, and the snapshots they came from (for ``watch``)."""

    at: float  # time.monotonic() when it began
    elapsed: float
    up: Mapping[str, bool]
    errors: Mapping[str, str]
    values: Values
    postgres: postgres.PostgresSnapshot | None = None
    pgbouncer: bouncer.BouncerSnapshot | None = None
    # Sources that can never answer as given (e.g. --dsn names PgBouncer's admin console):
    # a usage error, not an outage, for a caller that can still tell the user.
    misconfigured: Mapping[str, str] = field(default_factory=dict)

    def value(self, name: str, **labels: str) -> float | None:
        """The value of one series, ``None`` when absent."""
        want = tuple(sorted(labels.items()))
        return next((v for lab, v in self.values.get(name, []) if tuple(sorted(lab)) == want),
                    None)


def _labels(**pairs: str) -> Labels:
    return tuple(pairs.items())


def _top(per_label: Mapping[str, float], key: str) -> list[tuple[Labels, float]]:
    ranked = sorted(per_label.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_LABELS]
    return [(((key, name),), value) for name, value in ranked]


def postgres_values(snap: postgres.PostgresSnapshot) -> Values:
    """The PostgreSQL gauges of one snapshot."""
    queues: Counter[str] = Counter(lock.relation for lock in snap.locks if not lock.granted
                                   and lock.locktype == "relation" and lock.relation)
    roots: dict[str, float] = {}
    for chain in snap.chains:
        roots[chain.root.label] = max(roots.get(chain.root.label, 0.0), chain.longest_wait)
    longest: dict[str, float] = {}
    for s in snap.client_sessions():
        if s.xact_age is not None:
            longest[s.label] = max(longest.get(s.label, 0.0), s.xact_age)
    return {
        "pgsteady_lock_queue_length": _top(queues, "relation"),
        "pgsteady_blocking_root_seconds": _top(roots, "application_name"),
        "pgsteady_longest_transaction_seconds": _top(longest, "application_name"),
        "pgsteady_idle_in_transaction_sessions": [((), float(snap.idle_in_transaction))],
        "pgsteady_xmin_horizon_age_seconds": [((), snap.xmin_horizon_age)],
        "pgsteady_connections_used_ratio": [
            ((), snap.connections_used / snap.usable_connections)],
        "pgsteady_connections_used": [((), float(snap.connections_used))],
        "pgsteady_connections_usable": [((), float(snap.usable_connections))],
    }


def pool_size(snap: bouncer.BouncerSnapshot, database: str) -> int:
    """The pool_size PgBouncer applies to ``database`` (its own, else default_pool_size)."""
    db = snap.database(database)
    if db is not None and db.pool_size > 0:
        return db.pool_size
    try:
        return max(1, int(snap.setting("default_pool_size", "20")))
    except ValueError:
        return 20


class RefillTracker:
    """Across scrapes: since when each pool has had a login pending, clients waiting, and no
    new server connection (a healthy refill adds one within milliseconds and resets it)."""

    def __init__(self) -> None:
        self._since: dict[tuple[str, str], tuple[float, int]] = {}

    def update(self, pools: list[bouncer.Pool], now: float) -> dict[tuple[str, str], float]:
        stuck_now: dict[tuple[str, str], tuple[float, int]] = {}
        seconds = {}
        for pool in pools:
            before = self._since.get(pool.key)
            if pool.sv_login > 0 and pool.cl_waiting > 0:
                if before is not None and pool.servers_ready <= before[1]:
                    stuck_now[pool.key] = before
                else:
                    stuck_now[pool.key] = (now, pool.servers_ready)
            seconds[pool.key] = now - stuck_now[pool.key][0] if pool.key in stuck_now else 0.0
        self._since = stuck_now
        return seconds


def pgbouncer_values(snap: bouncer.BouncerSnapshot, refill: RefillTracker,
                     now: float) -> Values:
    """The PgBouncer gauges of one reading (its last sample), refill-stuck tracked by
    ``refill``."""
    pools = [p for p in (snap.samples[-1].pools if snap.samples else ())
             if p.database != ADMIN_DB]
    stuck = refill.update(pools, now)
    values: Values = {name: [] for name in (
        "pgsteady_pgbouncer_pool_used_ratio", "pgsteady_pgbouncer_clients_waiting",
        "pgsteady_pgbouncer_clients_active", "pgsteady_pgbouncer_servers",
        "pgsteady_pgbouncer_max_wait_seconds", "pgsteady_pgbouncer_refill_stuck_seconds")}
    for p in pools:
        key = _labels(database=p.database, user=p.user)
        values["pgsteady_pgbouncer_pool_used_ratio"].append(
            (key, p.sv_active / pool_size(snap, p.database)))
        values["pgsteady_pgbouncer_clients_waiting"].append((key, float(p.cl_waiting)))
        values["pgsteady_pgbouncer_clients_active"].append((key, float(p.cl_active)))
        values["pgsteady_pgbouncer_max_wait_seconds"].append((key, p.maxwait))
        values["pgsteady_pgbouncer_refill_stuck_seconds"].append((key, stuck[p.key]))
        for state, count in (("active", p.sv_active), ("idle", p.sv_idle), ("used", p.sv_used),
                             ("tested", p.sv_tested), ("login", p.sv_login)):
            values["pgsteady_pgbouncer_servers"].append(((*key, ("state", state)),
                                                         float(count)))
    return values


class LogTail:
    """PgBouncer's log from where the exporter started: event totals, following rotation."""

    def __init__(self, path: Path, max_bytes: int = LOG_READ_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.totals: Counter[str] = Counter()
        self._inode: int | None = None
        self._offset = 0
        try:
            st = path.stat()
            self._inode, self._offset = st.st_ino, st.st_size
        except OSError:
            pass  # not there yet: read from its start once it appears

    def read(self) -> Counter[str]:
        """Count the complete lines written since the last read; OSError if unreadable."""
        st = self.path.stat()
        if st.st_ino != self._inode or st.st_size < self._offset:
            self._inode, self._offset = st.st_ino, 0  # rotated or truncated: a new file
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            chunk = f.read(self.max_bytes)
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(complete)
        for event in bouncer.parse_lines(complete.decode("utf-8", "replace").splitlines()):
            self.totals[event.kind] += 1
        return Counter(self.totals)


@dataclass
class _Source:
    name: str
    read: Callable[[float], Any]  # deadline (monotonic) -> result
    inflight: Future[Any] | None = field(default=None)


class Exporter:
    """Reads the configured sources on each :meth:`scrape`, each within ``timeout`` seconds.

    Thread-safe. Each source has at most one read under way; :meth:`close` waits for it a
    bounded time (reads are bounded by their sources' connect and statement timeouts)."""

    def __init__(self, dsn: str | None = None, pgbouncer: str | None = None,
                 pgbouncer_log: str | os.PathLike[str] | None = None, *,
                 timeout: float = SCRAPE_TIMEOUT, label: str = "pgsteady-exporter") -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._last: Scrape | None = None
        self._refill = RefillTracker()
        self._sources: list[_Source] = []
        if dsn is not None:
            name = default_label(label)
            self._sources.append(_Source("postgres", lambda deadline: postgres.take_snapshot(
                dsn, deadline=deadline, query_chars=QUERY_CHARS, application_name=name)))
        if pgbouncer is not None:
            self._sources.append(_Source("pgbouncer", lambda deadline: bouncer.sample(
                pgbouncer, samples=1, deadline=deadline)))
        if pgbouncer_log is not None:
            tail = LogTail(Path(pgbouncer_log))
            self._sources.append(_Source("pgbouncer_log", lambda deadline: tail.read()))

    @property
    def sources(self) -> list[str]:
        return [s.name for s in self._sources]

    def scrape(self, timeout: float | None = None, *, quiet: bool = False,
               max_age: float = 0.0) -> Scrape:
        """Read every source in parallel; whatever has not answered by the deadline is down
        (logged, unless ``quiet``). With ``max_age``, a scrape (made with ``max_age`` too)
        that started less than that many seconds ago is returned as it is, reading nothing."""
        start = time.monotonic()
        if max_age > 0:
            with self._lock:
                last = self._last
            if last is not None and start - last.at < max_age:
                return last
        deadline = start + (self.timeout if timeout is None else timeout)
        with self._lock:
            futures = {}
            for source in self._sources:
                if source.inflight is None or source.inflight.done():
                    source.inflight = _start(source, deadline)
                futures[source.name] = source.inflight
        wait_futures(list(futures.values()), timeout=max(0.0, deadline - time.monotonic()))
        up: dict[str, bool] = {}
        errors: dict[str, str] = {}
        misconfigured: dict[str, str] = {}
        results: dict[str, Any] = {}
        for name, future in futures.items():
            if not future.done():
                errors[name] = f"no answer within {deadline - start:.1f}s"
            elif future.exception() is not None:
                exc = future.exception()
                errors[name] = scrub(str(exc).strip().splitlines()[0] if str(exc).strip()
                                     else type(exc).__name__)
                if isinstance(exc, PgsteadyError) and exc.exit_code == EXIT_USAGE:
                    misconfigured[name] = errors[name]  # e.g. sslmode=bogus, the console as --dsn
            else:
                results[name] = future.result()
            up[name] = name in results
            if name in errors and not quiet:
                log.warning("scrape: %s is down: %s", name, errors[name])
        values: Values = {"pgsteady_up": [(_labels(source=n), float(ok))
                                          for n, ok in up.items()]}
        pg = results.get("postgres")
        if pg is not None:
            values.update(postgres_values(pg))
        pgb = results.get("pgbouncer")
        if pgb is not None:
            with self._lock:
                values.update(pgbouncer_values(pgb, self._refill, time.monotonic()))
        totals = results.get("pgbouncer_log")
        if totals is not None:
            values["pgsteady_pgbouncer_not_ready_closures_total"] = [
                ((), float(totals.get("not_ready", 0)))]
            values["pgsteady_pgbouncer_dropped_cancels_total"] = [
                ((), float(totals.get("cancel_idle", 0)))]
        scrape = Scrape(start, time.monotonic() - start, up, errors, values, pg, pgb,
                        misconfigured)
        if max_age > 0:  # shared only among the scrapes that ask for it (/metrics)
            with self._lock:
                if self._last is None or self._last.at < start:
                    self._last = scrape
        return scrape

    def close(self, wait: float = CLOSE_WAIT) -> None:
        """Wait up to ``wait`` seconds for reads still under way (their own timeouts end them);
        one that hangs past that (a peer gone silent mid-read) is left to its daemon thread."""
        with self._lock:
            busy = [s.inflight for s in self._sources if s.inflight is not None]
        wait_futures(busy, timeout=wait)


def _start(source: _Source, deadline: float) -> Future[Any]:
    """Read ``source`` on a daemon thread of its own: a read that never returns can neither
    block a scrape past its deadline nor keep the process from exiting."""
    future: Future[Any] = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(source.read(deadline))
        except BaseException as exc:  # handed to the scrape, which reports the source down
            future.set_exception(exc)

    threading.Thread(target=work, name=f"pgsteady-exporter-{source.name}", daemon=True).start()
    return future


def families(scrape: Scrape) -> Iterator[Metric]:
    """The scrape as prometheus-client metric families, in :data:`METRICS` order."""
    for metric in METRICS:
        series = scrape.values.get(metric.name)
        if series is None:
            continue
        family: GaugeMetricFamily | CounterMetricFamily
        if metric.kind == "counter":
            family = CounterMetricFamily(metric.name, metric.help, labels=metric.labels)
        else:
            family = GaugeMetricFamily(metric.name, metric.help, labels=metric.labels)
        for labels, value in series:
            family.add_metric([v for _, v in labels], value)
        yield family


class ExporterCollector:
    """A prometheus-client collector: one :meth:`Exporter.scrape` per collection, shared by
    the collections within ``share_for`` seconds of it (:data:`SHARE_FOR`)."""

    def __init__(self, exporter: Exporter, share_for: float = SHARE_FOR) -> None:
        self.exporter = exporter
        self.share_for = share_for

    def collect(self) -> Iterator[Metric]:
        yield from families(self.exporter.scrape(max_age=self.share_for))

    def describe(self) -> list[Metric]:
        return []  # no scrape at registration time


def metrics_app(registry: Collector) -> _http.App:
    """``GET /metrics`` (any path but ``/favicon.ico``, as prometheus-client serves it), in the
    format and encoding Prometheus asks for."""
    def app(request: _http.Request) -> _http.Response:
        if request.method not in ("GET", "HEAD"):
            return _http.text(405, "only GET and HEAD")
        if request.path == "/favicon.ico":
            return _http.Response(200, [])
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = encoder(registry)
        headers = [("Content-Type", content_type)]
        if gzip_accepted(request.headers.get("Accept-Encoding", "")):
            body = gzip.compress(body)
            headers.append(("Content-Encoding", "gzip"))
        return _http.Response(200, headers, body)
    return app


def serve(exporter: Exporter, host: str = "127.0.0.1", port: int = 0,
          limits: _http.Limits | None = None) -> _http.BoundedServer:
    """Serve ``exporter``'s ``/metrics`` on a :class:`~pgsteady._http.BoundedServer` (started;
    OSError if it cannot listen). Not prometheus-client's ``start_http_server``: that one keeps
    a thread per connection with no header timeout."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ExporterCollector(exporter))
    return _http.BoundedServer(metrics_app(registry), host, port, limits,
                               name="pgsteady-exporter-http").start()
