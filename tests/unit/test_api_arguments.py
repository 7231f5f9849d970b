"""The public constructors of guards, health and metrics refuse wrong types and values at once,
with a UsageError naming the argument, instead of a TypeError/AttributeError deep in a later
call (or a label that breaks the next Prometheus scrape)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from pgsteady import Database
from pgsteady.errors import UsageError
from pgsteady.guards import CircuitBreaker, KeyedLimiter, MemoryBackend, StaleCache, bounded
from pgsteady.guards.backends import RedisBackend
from pgsteady.guards.limits import AsyncKeyedLimiter
from pgsteady.health import Health, breaker_check, db_check
from pgsteady.metrics import instrument

NAN, INF = float("nan"), float("inf")


def _db() -> Database:
    return Database("host=127.0.0.1 port=1", open=False)


BAD: dict[str, tuple[Callable[[], Any], str]] = {
    "breaker failure_rate text": (lambda: CircuitBreaker("x", failure_rate="0.5"),
                                  "failure_rate"),
    "breaker min_calls fraction": (lambda: CircuitBreaker("x", min_calls=1.5), "min_calls"),
    "breaker half_open_calls text": (lambda: CircuitBreaker("x", half_open_calls="1"),
                                     "half_open_calls"),
    "breaker window nan": (lambda: CircuitBreaker("x", window=NAN), "window"),
    "breaker window inf": (lambda: CircuitBreaker("x", window=INF), "window"),
    "breaker open_for text": (lambda: CircuitBreaker("x", open_for="5s"), "open_for"),
    "breaker open_for inf": (lambda: CircuitBreaker("x", open_for=INF), "open_for"),
    "breaker name number": (lambda: CircuitBreaker(5), "name"),  # type: ignore[arg-type]
    "breaker name empty": (lambda: CircuitBreaker(""), "name"),
    "breaker failure_on not types": (lambda: CircuitBreaker("x", failure_on=(5,)),
                                     "failure_on"),
    "cache backend text": (lambda: StaleCache("redis://x", fresh_for=1, stale_for=2),
                           "backend"),
    "memory max_entries text": (lambda: MemoryBackend("10"), "max_entries"),
    "memory max_entries fraction": (lambda: MemoryBackend(2.5), "max_entries"),
    "redis url number": (lambda: RedisBackend(5), "url"),  # type: ignore[arg-type]
    "limiter max_per_key fraction": (lambda: KeyedLimiter(1.5), "max_per_key"),
    "limiter max_per_key text": (lambda: KeyedLimiter("2"), "max_per_key"),
    "limiter backend text": (lambda: KeyedLimiter(2, backend="redis://"), "backend"),
    "async limiter max_per_key text": (lambda: AsyncKeyedLimiter("2"), "max_per_key"),
    "health checks list": (lambda: Health([1, 2]), "checks"),  # type: ignore[arg-type]
    "health check name number": (lambda: Health({5: lambda: None}), "name"),
    "health timeout nan": (lambda: Health({}, timeout=NAN), "timeout"),
    "health timeout inf": (lambda: Health({}, timeout=INF), "timeout"),
    "health timeout text": (lambda: Health({}, timeout="1s"), "timeout"),
    "health deep_timeout text": (lambda: Health({}, deep_timeout="3s"), "deep_timeout"),
    "health max_threads zero": (lambda: Health({}, max_threads=0), "max_threads"),
    "db_check text": (lambda: db_check("postgres://"), "db_check"),
    "db_check none": (lambda: db_check(None), "db_check"),
    "breaker_check text": (lambda: breaker_check("x"), "breaker_check"),  # type: ignore[arg-type]
    "instrument none": (lambda: instrument(None), "instrument"),  # type: ignore[arg-type]
    "instrument text": (lambda: instrument("db"), "instrument"),  # type: ignore[arg-type]
    "instrument registry text": (lambda: instrument(_db(), "reg"), "registry"),  # type: ignore[arg-type]
    "instrument name number": (lambda: instrument(_db(), CollectorRegistry(), name=5),
                               "name"),  # type: ignore[arg-type]
    "health serve port too big": (lambda: Health({}).serve(99999), "port"),
    "health serve port text": (lambda: Health({}).serve("8081"), "port"),  # type: ignore[arg-type]
    "bounded max_rows text": (lambda: bounded(_db(), "select 1", max_rows="10"), "max_rows"),
    "bounded db text": (lambda: bounded("db", "select 1"), "Database"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", BAD, ids=str)
def test_bad_constructor_arguments_are_usage_errors_naming_the_argument(case):
    """A wrong type or value is a one-line UsageError that names the argument."""
    make, names = BAD[case]
    with pytest.raises(UsageError) as info:
        make()
    message = str(info.value)
    assert names in message
    assert "\n" not in message


def test_good_arguments_still_work():
    """The checks accept what the README shows: timedelta-free floats, ints, a real Database."""
    from datetime import timedelta

    breaker = CircuitBreaker("orgs-db", failure_rate=1, min_calls=3, window=timedelta(seconds=30),
                             open_for=5)
    assert breaker.window == 30
    KeyedLimiter(2, lease=30)
    Health({"breaker": breaker_check(breaker)}, timeout=timedelta(seconds=1)).close()
    db = _db()
    try:
        db_check(db)
        instrument(db, CollectorRegistry(), name="app")
    finally:
        db.close()
