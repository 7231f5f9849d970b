"""What a service wraps around its lookups: a stale-on-error cache, a circuit breaker,
per-key limits and bounded queries. This module only re-exports."""

from pgsteady.guards.backends import Backend, MemoryBackend, RedisBackend
from pgsteady.guards.breaker import BreakerStats, CircuitBreaker
from pgsteady.guards.cache import STALE_ON, AsyncStaleCache, CacheStats, Served, StaleCache
from pgsteady.guards.codec import TypedJson
from pgsteady.guards.limits import AsyncKeyedLimiter, KeyedLimiter, Rows, abounded, bounded

__all__ = [
    "STALE_ON",
    "AsyncKeyedLimiter",
    "AsyncStaleCache",
    "Backend",
    "BreakerStats",
    "CacheStats",
    "CircuitBreaker",
    "KeyedLimiter",
    "MemoryBackend",
    "RedisBackend",
    "Rows",
    "Served",
    "StaleCache",
    "TypedJson",
    "abounded",
    "bounded",
]
