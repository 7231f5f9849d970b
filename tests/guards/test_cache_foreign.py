"""A foreign or damaged entry in Redis under a cache key (another program's value, a bad
stamp, a tag with the wrong contents, JSON nested past the recursion limit) is a miss: the
loader runs, its value overwrites the entry, and the cache says so once, never raising out
of a lookup nor serving the entry as fresh."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from pgsteady.guards import AsyncStaleCache, RedisBackend, StaleCache


def _shapes() -> dict[str, bytes]:
    now = b"%.6f" % time.time()
    deep = b"[" * 100_000 + b"]" * 100_000
    return {
        "no stamp": b"hello",
        "a JSON list": b"[1, 2, 3]",
        "a JSON object": b'{"org": 1}',
        "empty": b"",
        "nan stamp": b"nan|1",
        "inf stamp": b"inf|1",
        "minus inf stamp": b"-inf|1",
        "stamp a year ahead": b"%.6f|1" % (time.time() + 365 * 86400),
        "not JSON": now + b"|not json",
        "not UTF-8": now + b"|\xff\xfe\x00",
        "deep nesting": now + b"|" + deep,
        "deep nesting, tagged": now + b"|~" + deep,
        "huge timedelta": now + b'|~{"~":"timedelta","v":[999999999999,0,0]}',
        "timedelta of text": now + b'|~{"~":"timedelta","v":"x"}',
        "tuple of a number": now + b'|~{"~":"tuple","v":5}',
        "unknown tag": now + b'|~{"~":"pickle","v":"gASV"}',
        "tag that is a list": now + b'|~{"~":["x"],"v":1}',
        "tag without a value": now + b'|~{"~":"tuple"}',
        "dict of numbers": now + b'|~{"~":"dict","v":[1,2]}',
        "dict with a list key": now + b'|~{"~":"dict","v":[[[1],2]]}',
        "bytes not base64": now + b'|~{"~":"bytes","v":"!!!"}',
        "uuid of a number": now + b'|~{"~":"uuid","v":5}',
        "datetime of text": now + b'|~{"~":"datetime","v":"yesterday"}',
        "decimal of a list": now + b'|~{"~":"decimal","v":[1]}',
    }


SHAPES = _shapes()  # the names; each test makes its entries when it runs
VALUE = {"org": 7, "limit": (1, 2)}


def _check_overwritten(redis, key: str) -> None:
    with redis.client() as client:
        raw = client.get(f"pgsteady:{key}")
    stamp, payload = raw.split(b"|", 1)
    assert abs(float(stamp) - time.time()) < 60
    assert payload.startswith(b"~")  # this cache's own entry now


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_foreign_entry_is_a_miss_loaded_and_overwritten(pgsteady_redis, caplog, shape):
    """StaleCache: the entry is a miss (the loader runs once), the loaded value replaces it,
    the next lookup is a fresh hit, and one warning names the key."""
    with pgsteady_redis.client() as client:
        client.set("pgsteady:org:7", _shapes()[shape])  # stamped now, not at collection
    cache = StaleCache(RedisBackend(pgsteady_redis.url), fresh_for=60, stale_for=120)
    calls = []
    with caplog.at_level(logging.WARNING, logger="pgsteady.guards"):
        assert cache.get_or_load("org:7", lambda: calls.append(1) or VALUE) == VALUE
        assert cache.get_or_load("org:7", lambda: calls.append(1) or VALUE) == VALUE
        assert cache.lookup("org:7", lambda: calls.append(1) or VALUE).stale is False
    assert len(calls) == 1
    _check_overwritten(pgsteady_redis, "org:7")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "'org:7' is not one this cache wrote" in warnings[0]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_async_a_foreign_entry_is_a_miss_loaded_and_overwritten(pgsteady_redis, caplog,
                                                                shape):
    """AsyncStaleCache: the same, through the asyncio client."""
    with pgsteady_redis.client() as client:
        client.set("pgsteady:org:7", _shapes()[shape])  # stamped now, not at collection
    calls = []

    async def load() -> dict:
        calls.append(1)
        return VALUE

    async def main() -> None:
        backend = RedisBackend(pgsteady_redis.url)
        cache = AsyncStaleCache(backend, fresh_for=60, stale_for=120)
        assert await cache.get_or_load("org:7", load) == VALUE
        assert (await cache.lookup("org:7", load)).stale is False
        await backend.aclose()

    with caplog.at_level(logging.WARNING, logger="pgsteady.guards"):
        asyncio.run(main())
    assert len(calls) == 1
    _check_overwritten(pgsteady_redis, "org:7")
    assert sum("is not one this cache wrote" in r.getMessage() for r in caplog.records) == 1


def test_many_foreign_entries_warn_once(pgsteady_redis, caplog):
    """Twenty keys holding foreign entries: each loads once, one warning in all (a fleet
    sharing the damaged entries must not flood its logs)."""
    with pgsteady_redis.client() as client:
        for i in range(20):
            client.set(f"pgsteady:k{i}", b"nan|1")
    cache = StaleCache(RedisBackend(pgsteady_redis.url), fresh_for=60, stale_for=120)
    with caplog.at_level(logging.WARNING, logger="pgsteady.guards"):
        for i in range(20):
            assert cache.get_or_load(f"k{i}", lambda i=i: i) == i
    assert sum("is not one this cache wrote" in r.getMessage() for r in caplog.records) == 1
