"""``instrument(db)``: a service's own pools as Prometheus metrics, read at scrape time.

Seed 002's team could not tell how full their pools were; every service should say. The
collector reads ``db.stats()`` only when Prometheus scrapes, so a query costs nothing extra.
One collector per registry serves every instrumented database in the process: two databases,
or a closed one replaced by a new one under the same name, never register a duplicate series.
Databases with the same ``service`` and ``name`` are summed; a closed database stops being
reported (its replacement takes over its series), and a collected one is forgotten.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Protocol

import psycopg
from psycopg.conninfo import conninfo_to_dict

from pgsteady import _checks
from pgsteady._core import DatabaseStats
from pgsteady._extras import needs
from pgsteady.errors import UsageError

with needs("metrics", "pgsteady.metrics (instrument)"):
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.registry import REGISTRY, CollectorRegistry

PHASES = ("queued", "connecting", "running")


class _HasStats(Protocol):
    # Read-only (a property): a plain ``settings: object`` attribute is writable, and mypy
    # --strict rejects Database (settings: SessionSettings) for it, as invariant.
    @property
    def settings(self) -> object: ...

    def stats(self) -> DatabaseStats: ...


class ClientCollector:
    """Every instrumented ``Database``/``AsyncDatabase`` of one registry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dbs: list[tuple[weakref.ref[_HasStats], str, str]] = []

    def add(self, db: _HasStats, service: str, name: str) -> None:
        with self._lock:
            self._dbs = [(ref, s, n) for ref, s, n in self._dbs
                         if ref() is not None and ref() is not db]
            self._dbs.append((weakref.ref(db), service, name))

    def _stats(self) -> dict[tuple[str, str], list[DatabaseStats]]:
        with self._lock:
            live = [(ref(), s, n) for ref, s, n in self._dbs]
            self._dbs = [(ref, s, n) for ref, s, n in self._dbs if ref() is not None]
        grouped: dict[tuple[str, str], list[DatabaseStats]] = {}
        for db, service, name in live:
            if db is None:
                continue
            stats = db.stats()
            if not stats.closed:
                grouped.setdefault((service, name), []).append(stats)
        return grouped

    def describe(self) -> list[Metric]:
        return []   # series come and go with databases; no fixed description

    def collect(self) -> Iterator[Metric]:
        labels = ["service", "database"]
        gauges = {
            "pool_size": ("Connections the client pool may hold.", "pool_size"),
            "pool_in_use": ("Connections running a job right now.", "connections_in_use"),
            "queued": ("Jobs waiting for a worker and a connection.", "queued"),
        }
        counters = {
            "answered": ("Jobs answered within their caller's deadline.", "answered"),
            "overloaded": ("Jobs refused at once because the backlog was full.", "overloaded"),
            "abandoned_completions": ("Jobs that finished after their caller gave up.",
                                      "abandoned_completions"),
            "dropped_before_start": ("Jobs dropped untouched: their caller left first.",
                                     "dropped_before_start"),
            "failed": ("Jobs the server or the driver failed.", "failed"),
        }
        grouped = self._stats()
        for metric, (doc, attr) in gauges.items():
            family = GaugeMetricFamily(f"pgsteady_client_{metric}", doc, labels=labels)
            for key, stats in grouped.items():
                family.add_metric(list(key), sum(getattr(s, attr) for s in stats))
            yield family
        for metric, (doc, attr) in counters.items():
            counter = CounterMetricFamily(f"pgsteady_client_{metric}", doc, labels=labels)
            for key, stats in grouped.items():
                counter.add_metric(list(key), sum(getattr(s, attr) for s in stats))
            yield counter
        exceeded = CounterMetricFamily(
            "pgsteady_client_deadline_exceeded",
            "Callers whose deadline passed, by where the job was (the query, if it started, "
            "still ran to completion).", labels=[*labels, "phase"])
        for key, stats in grouped.items():
            for phase in PHASES:
                exceeded.add_metric([*key, phase], sum(getattr(s, f"deadline_exceeded_{phase}")
                                                       for s in stats))
        yield exceeded


_collectors: weakref.WeakKeyDictionary[CollectorRegistry, ClientCollector] = (
    weakref.WeakKeyDictionary())
_collectors_lock = threading.Lock()


def instrument(db: _HasStats, registry: CollectorRegistry | None = None, *,
               name: str | None = None) -> ClientCollector:
    """Report ``db``'s pool in ``registry`` (the default one unless given), labelled with
    its ``service`` and ``name`` (default: the database it connects to)."""
    if not callable(getattr(db, "stats", None)) or not hasattr(db, "settings"):
        raise UsageError(f"instrument needs a Database or AsyncDatabase, got "
                         f"{type(db).__name__} {db!r}")
    if registry is not None and not isinstance(registry, CollectorRegistry):
        raise UsageError(f"registry must be a prometheus_client CollectorRegistry or None, "
                         f"got {type(registry).__name__} {registry!r}")
    if name is not None:
        _checks.text(name, "name (the database label)")
    target = REGISTRY if registry is None else registry
    service = str(getattr(db.settings, "service", "pgsteady"))
    label = name if name is not None else _database_name(db)
    with _collectors_lock:
        collector = _collectors.get(target)
        if collector is None:
            collector = ClientCollector()
            target.register(collector)
            _collectors[target] = collector
    collector.add(db, service, label)
    return collector


def _database_name(db: object) -> str:
    """``host:port/dbname`` from the (already redacted) conninfo, for the ``database`` label."""
    try:
        parts = conninfo_to_dict(str(getattr(db, "conninfo", "")))
    except psycopg.Error:   # a label is never worth failing a service for
        return "unknown"
    return f"{parts.get('host', 'local')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"
