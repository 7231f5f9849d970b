"""``instrument_guards(...)``: breakers and caches as Prometheus metrics, read at scrape time.

An open breaker and a cache serving stale entries are exactly what an on-call engineer needs
to see during seed 002's outage (the gateway "partially degraded"): the service looks up,
and only these counters say it is living on stale data. Like ``pgsteady.metrics``, the
collector reads ``stats()`` only when Prometheus scrapes, and forgets guards that are
garbage-collected. Needs the ``metrics`` extra (prometheus-client).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any

from pgsteady._extras import needs
from pgsteady.errors import UsageError
from pgsteady.guards.breaker import CircuitBreaker
from pgsteady.guards.cache import AsyncStaleCache, StaleCache

with needs("metrics", "pgsteady.guards.metrics (instrument_guards)"):
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.registry import REGISTRY, CollectorRegistry

STATE_VALUES = {"closed": 0, "half-open": 1, "open": 2}

_CACHE_COUNTERS = {
    "fresh_hits": "Lookups answered from a fresh entry, without the loader.",
    "loads": "Loader calls (one per key and process at a time).",
    "load_failures": "Loader calls that failed; a failure is never cached.",
    "served_stale": "Lookups answered with a stale entry (the loader failed or was busy).",
    "waited_for_load": "Lookups that waited for another caller's load.",
    "backend_errors": "Cache backend (Redis) failures; the loader was used instead.",
    "backend_skipped": "Cache backend (Redis) calls skipped because its breaker was open.",
}


class GuardCollector:
    """Every instrumented breaker and cache of one registry, by name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (is a breaker, name) -> guard: a breaker and a cache may share a name
        self._guards: dict[tuple[bool, str], weakref.ref[Any]] = {}

    def add(self, name: str, guard: Any) -> None:
        with self._lock:
            self._guards[(isinstance(guard, CircuitBreaker), name)] = weakref.ref(guard)

    def _live(self) -> list[tuple[str, Any]]:
        with self._lock:
            live = [(key[1], ref()) for key, ref in self._guards.items()]
            self._guards = {k: r for k, r in self._guards.items() if r() is not None}
        return [(name, guard) for name, guard in live if guard is not None]

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        live = self._live()
        breakers = [(n, g.stats()) for n, g in live if isinstance(g, CircuitBreaker)]
        caches = [(n, g.stats()) for n, g in live if not isinstance(g, CircuitBreaker)]
        state = GaugeMetricFamily("pgsteady_breaker_state",
                                  "0 closed, 1 half-open, 2 open (calls fail fast).",
                                  labels=["breaker"])
        transitions = CounterMetricFamily("pgsteady_breaker_transitions",
                                          "State changes, by the state entered.",
                                          labels=["breaker", "to"])
        rejected = CounterMetricFamily("pgsteady_breaker_rejected",
                                       "Calls refused with CircuitOpen.", labels=["breaker"])
        failures = CounterMetricFamily("pgsteady_breaker_failures",
                                       "Calls that counted as failures.", labels=["breaker"])
        for name, stats in breakers:
            state.add_metric([name], STATE_VALUES[stats.state])
            for to, count in (("open", stats.opened), ("half-open", stats.half_opened),
                              ("closed", stats.closed)):
                transitions.add_metric([name, to], count)
            rejected.add_metric([name], stats.rejected)
            failures.add_metric([name], stats.failures)
        yield from (state, transitions, rejected, failures)
        for field, doc in _CACHE_COUNTERS.items():
            family = CounterMetricFamily(f"pgsteady_cache_{field}", doc, labels=["cache"])
            for name, cache_stats in caches:
                family.add_metric([name], getattr(cache_stats, field))
            yield family
        backend = GaugeMetricFamily("pgsteady_cache_backend_state",
                                    "The cache backend's breaker: 0 closed, 1 half-open, 2 "
                                    "open (Redis not asked; this process's memory serves).",
                                    labels=["cache"])
        for name, cache_stats in caches:
            backend.add_metric([name], STATE_VALUES[cache_stats.backend_state])
        yield backend


_collectors: weakref.WeakKeyDictionary[CollectorRegistry, GuardCollector] = (
    weakref.WeakKeyDictionary())
_collectors_lock = threading.Lock()


def instrument_guards(registry: CollectorRegistry | None = None,
                      **guards: CircuitBreaker | StaleCache | AsyncStaleCache) -> GuardCollector:
    """Report breakers and caches in ``registry`` (the default one unless given), each under
    the keyword it is passed as: ``instrument_guards(orgs_db=breaker, org_settings=cache)``."""
    for name, guard in guards.items():
        if not isinstance(guard, CircuitBreaker | StaleCache | AsyncStaleCache):
            raise UsageError(f"instrument_guards({name}=...) takes a CircuitBreaker or a "
                             f"(Async)StaleCache, got {type(guard).__name__}")
    target = REGISTRY if registry is None else registry
    with _collectors_lock:
        collector = _collectors.get(target)
        if collector is None:
            collector = GuardCollector()
            target.register(collector)
            _collectors[target] = collector
    for name, guard in guards.items():
        collector.add(name, guard)
    return collector
