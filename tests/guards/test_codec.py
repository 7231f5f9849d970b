"""TypedJson: a value comes back from Redis as the types it went in with, as from memory,
and what cannot come back as itself is refused with either backend."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from decimal import Decimal
from typing import Any, NamedTuple

import pytest

from pgsteady.guards import AsyncStaleCache, MemoryBackend, RedisBackend, StaleCache, TypedJson

VALUES: list[Any] = [
    (1, "a"),
    {1: "a", 2: "b"},
    {"rows": [(1, "x"), (2, None)], "total": 2},
    {None: 0, True: 1, 2.5: 2, (1, 2): 3},
    {"~": "not a tag", "v": 1},
    b"\x00\xffbytes",
    dt.datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=dt.UTC),
    dt.date(2024, 5, 1),
    dt.timedelta(days=1, microseconds=7),
    Decimal("19.90"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    {"plain": [1, 2.5, "x", None, True]},
]


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(k, j) for k, j in zip(a, b, strict=True)) \
            and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def test_typed_values_survive_redis_as_they_survive_memory(pgsteady_redis):
    """Tuples, int/None/bool/float/tuple-keyed dicts, bytes, datetimes, Decimal and UUID
    come back from Redis (read by a second process's cache) with the same types as from
    memory; plain values are stored as plain JSON."""
    writer = StaleCache(RedisBackend(pgsteady_redis.url), fresh_for=60, stale_for=60)
    reader = StaleCache(RedisBackend(pgsteady_redis.url), fresh_for=60, stale_for=60)
    memory = StaleCache(fresh_for=60, stale_for=60)
    for i, value in enumerate(VALUES):
        writer.get_or_load(f"v{i}", lambda value=value: value)
        memory.get_or_load(f"v{i}", lambda value=value: value)
        from_redis = reader.get_or_load(f"v{i}", lambda: pytest.fail("loaded again"))
        from_memory = memory.get_or_load(f"v{i}", lambda: pytest.fail("loaded again"))
        assert _same(from_redis, value), (value, from_redis)
        assert _same(from_memory, from_redis)
    with pgsteady_redis.client() as client:
        assert client.get("pgsteady:v11").split(b"|", 1)[1] == \
            b'{"plain": [1, 2.5, "x", null, true]}'


class Point(NamedTuple):
    x: int
    y: int


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_values_that_would_change_are_refused_with_either_backend(pgsteady_redis, backend):
    """A set, a namedtuple or an object inside a value raises TypeError naming its type and
    where it is, with memory as with Redis, and nothing is cached."""
    store = MemoryBackend() if backend == "memory" else RedisBackend(pgsteady_redis.url)
    cache = StaleCache(store, fresh_for=60, stale_for=60)
    for value, named in (({"tags": {1, 2}}, "type set (value['tags'])"),
                         ([Point(1, 2)], "Point (value[0])"),
                         ({1: object()}, "type object (value[1])")):
        with pytest.raises(TypeError) as info:
            cache.get_or_load("k", lambda value=value: value)
        assert named in str(info.value) and "'k'" in str(info.value)
        assert store.get("k") is None

    async def main() -> None:
        acache = AsyncStaleCache(store, fresh_for=60, stale_for=60)

        async def load() -> Any:
            return (1, {2, 3})

        with pytest.raises(TypeError, match="type set"):
            await acache.get_or_load("k", load)

    asyncio.run(main())


def test_foreign_and_plain_entries_decode():
    """Plain JSON written by another client decodes as JSON; an unknown tag is a ValueError
    (a miss for the cache), never code run."""
    codec = TypedJson()
    assert codec.loads('{"a": [1, 2]}') == {"a": [1, 2]}
    with pytest.raises(ValueError, match="unknown tag"):
        codec.loads(b'~{"~": "pickle", "v": "gASVAAAA"}')
