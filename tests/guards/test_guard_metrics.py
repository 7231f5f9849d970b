"""instrument_guards: breaker state and cache counters in a Prometheus registry."""

from __future__ import annotations

import gc

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from pgsteady.errors import UsageError
from pgsteady.guards import CircuitBreaker, StaleCache
from pgsteady.guards.metrics import instrument_guards


def test_breaker_and_cache_series_follow_their_stats():
    """An opened breaker reads 2 with one transition to open; cache hits and stale serves
    are counted; a collected guard disappears from the scrape."""
    registry = CollectorRegistry()
    breaker = CircuitBreaker("pg", min_calls=1)
    cache = StaleCache(fresh_for=0, stale_for=60)
    instrument_guards(registry, orgs=breaker)
    instrument_guards(registry, orgs=cache)
    assert registry.get_sample_value("pgsteady_breaker_state", {"breaker": "orgs"}) == 0
    with pytest.raises(OSError), breaker:
        raise OSError
    cache.get_or_load("k", lambda: 1)
    cache.lookup("k", lambda: breaker.call(int, "1"))  # CircuitOpen: served stale
    sample = registry.get_sample_value
    assert sample("pgsteady_breaker_state", {"breaker": "orgs"}) == 2
    assert sample("pgsteady_breaker_transitions_total", {"breaker": "orgs", "to": "open"}) == 1
    assert sample("pgsteady_breaker_rejected_total", {"breaker": "orgs"}) == 1
    assert sample("pgsteady_cache_served_stale_total", {"cache": "orgs"}) == 1
    assert sample("pgsteady_cache_loads_total", {"cache": "orgs"}) == 2
    del cache
    gc.collect()
    assert b'cache="orgs"' not in generate_latest(registry)
    with pytest.raises(UsageError):
        instrument_guards(registry, nope=object())
