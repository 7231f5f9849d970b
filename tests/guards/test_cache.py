"""StaleCache / AsyncStaleCache on real PostgreSQL, the fault proxy and Redis: stale on
error, never caching a failure, single-flight, and a cache outage that is not an outage."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from pgsteady import AsyncDatabase, Database
from pgsteady.errors import CacheUnavailable, CircuitOpen, DeadlineExceeded, PgsteadyError
from pgsteady.guards import (
    AsyncStaleCache,
    CircuitBreaker,
    MemoryBackend,
    RedisBackend,
    StaleCache,
)


def _dsn(proxy) -> str:
    return f"host=127.0.0.1 port={proxy.port} dbname=postgres user=postgres"


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[int(len(ordered) * 0.99) - 1]


def test_gateway_lookup_through_a_blackhole(pgsteady_proxy):
    """Black-holed PostgreSQL: once the breaker opens, a cached key is served stale with p99
    under 10 ms and an uncached key fails with CircuitOpen in under 100 ms; when the database
    returns, values load fresh again and the breaker closes."""
    breaker = CircuitBreaker("orgs-db", min_calls=3, window=10, open_for=0.5)
    cache = StaleCache(fresh_for=0.05, stale_for=300)
    with Database(_dsn(pgsteady_proxy), pool_size=2, breaker=breaker, connect_timeout=2) as db:
        db.wait(10)

        def settings(org: int) -> dict:
            row = db.fetchone("select %s::int * 10", (org,), deadline=0.2)
            return {"org": org, "limit": row[0]}

        assert cache.get_or_load("org:1", lambda: settings(1)) == {"org": 1, "limit": 10}
        time.sleep(0.06)  # org:1 is now stale, not expired
        pgsteady_proxy.blackhole(True)
        for org in (2, 3):  # uncached lookups fail on their deadline, the breaker counts
            with pytest.raises(DeadlineExceeded):
                cache.get_or_load(f"org:{org}", lambda org=org: settings(org))
        assert breaker.state == "open"  # 2 of 3 calls in the window failed
        took = []
        for _ in range(300):
            start = time.perf_counter()
            served = cache.lookup("org:1", lambda: settings(1))
            took.append(time.perf_counter() - start)
            assert served.stale and served.value == {"org": 1, "limit": 10}
        assert _p99(took) < 0.1  # served at once: none waited for the 0.2 s database deadline
        start = time.monotonic()
        with pytest.raises(CircuitOpen):
            cache.get_or_load("org:5", lambda: settings(5))
        assert time.monotonic() - start < 0.100
        pgsteady_proxy.blackhole(False)
        time.sleep(0.6)  # open_for passes: the next call is the half-open trial
        served = cache.lookup("org:5", lambda: settings(5))
        assert served == type(served)({"org": 5, "limit": 50}, False, 0.0)
        assert breaker.state == "closed"
        assert cache.lookup("org:1", lambda: settings(1)).stale is False
        stats = cache.stats()
        assert stats.served_stale >= 300 and stats.load_failures >= 3


def test_a_failed_load_is_never_cached(pgsteady_proxy):
    """Key absent and database unreachable: an error; database back: the very next call loads."""
    cache = StaleCache(fresh_for=60, stale_for=300)
    calls = []
    with Database(_dsn(pgsteady_proxy), pool_size=1, connect_timeout=2) as db:
        db.wait(10)

        def load() -> int:
            calls.append(1)
            return db.fetchone("select 7", deadline=0.2)[0]

        pgsteady_proxy.blackhole(True)
        with pytest.raises(DeadlineExceeded):
            cache.get_or_load("k", load)
        pgsteady_proxy.blackhole(False)
        time.sleep(0.3)  # the abandoned query completes and frees its connection
        assert cache.get_or_load("k", load) == 7
        assert len(calls) == 2
        assert cache.get_or_load("k", load) == 7 and len(calls) == 2


@pytest.mark.parametrize("entry", ["stale", "absent"])
def test_fifty_callers_of_one_expired_key_cause_one_load(pgsteady_database, entry):
    """50 threads asking for one expired key at once make exactly one loader call; with a
    stale entry the others get it at once, without one they wait for that load."""
    # fresh_for 1 s: a thread the busy machine wakes late still finds the new value fresh
    cache = StaleCache(fresh_for=1, stale_for=1 if entry == "absent" else 60)
    calls = []
    with Database(pgsteady_database.dsn, pool_size=4) as db:
        def load() -> int:
            calls.append(1)
            return db.fetchone("select 5, pg_sleep(0.3)", deadline=5)[0]

        cache.get_or_load("hot", lambda: 4)
        time.sleep(1.05)
        barrier = threading.Barrier(50)

        def caller(_: int) -> tuple:
            barrier.wait(10)
            served = cache.lookup("hot", load, deadline=5)
            return served.value, served.stale

        with ThreadPoolExecutor(50) as pool:
            results = list(pool.map(caller, range(50)))
    assert len(calls) == 1
    if entry == "absent":
        assert results == [(5, False)] * 50
    else:  # the leader gets the new value; the others the stale one (or, if late, the new)
        assert (5, False) in results and set(results) <= {(5, False), (4, True)}
        assert results.count((4, True)) >= 40


def test_fifty_async_callers_cause_one_load(pgsteady_database):
    """The asyncio cache: 50 tasks on one absent key, one load, all get its value."""
    calls = []

    async def main() -> list:
        cache = AsyncStaleCache(fresh_for=1, stale_for=60)
        async with AsyncDatabase(pgsteady_database.dsn, pool_size=2) as db:
            async def load() -> int:
                calls.append(1)
                return (await db.fetchone("select 9, pg_sleep(0.2)", deadline=5))[0]

            return await asyncio.gather(*(cache.get_or_load("k", load, deadline=5)
                                          for _ in range(50)))

    assert asyncio.run(main()) == [9] * 50
    assert len(calls) == 1


def test_async_deadline_serves_stale_and_the_load_fills_the_cache(pgsteady_database):
    """AsyncStaleCache: a load slower than the deadline returns the stale entry on time and,
    when it ends, the fresh value is in the cache."""
    async def main() -> None:
        cache = AsyncStaleCache(fresh_for=0.01, stale_for=60)
        async with AsyncDatabase(pgsteady_database.dsn, pool_size=1) as db:
            async def slow() -> int:
                return (await db.fetchone("select 2, pg_sleep(0.4)", deadline=5))[0]

            await cache.get_or_load("k", _const(1))
            await asyncio.sleep(0.02)
            start = time.monotonic()
            served = await cache.lookup("k", slow, deadline=0.1)
            assert served.value == 1 and served.stale
            assert time.monotonic() - start < 0.3
            await asyncio.sleep(0.5)
            assert cache.backend.get("k")[0] == 2

    asyncio.run(main())


def _const(value: int):
    async def load() -> int:
        return value
    return load


def test_decorator_keys_by_argument():
    """@cache.cached(key=...) caches per formatted key and calls the function once per key."""
    cache = StaleCache(fresh_for=60, stale_for=60)
    calls = []

    @cache.cached(key="org:{0}")
    def org(org_id: int) -> dict:
        calls.append(org_id)
        return {"id": org_id}

    assert org(1) == {"id": 1} and org(1) == {"id": 1} and org(2) == {"id": 2}
    assert calls == [1, 2]


def test_other_errors_are_not_hidden_by_stale_entries():
    """A loader bug (ValueError) propagates even when a stale entry exists."""
    cache = StaleCache(fresh_for=0, stale_for=60)
    cache.get_or_load("k", lambda: 1)
    with pytest.raises(ValueError):
        cache.get_or_load("k", lambda: int("x"))
    cache_b = StaleCache(fresh_for=0, stale_for=60, stale_on=(ValueError,))
    cache_b.get_or_load("k", lambda: 1)
    assert cache_b.lookup("k", lambda: int("x")).stale


def test_memory_backend_is_a_bounded_lru():
    """MemoryBackend keeps at most max_entries, dropping the least recently used."""
    backend = MemoryBackend(max_entries=3)
    cache = StaleCache(backend, fresh_for=60, stale_for=60)
    for key in "abc":
        cache.get_or_load(key, lambda key=key: key)
    cache.get_or_load("a", lambda: "reloaded")  # touch a
    cache.get_or_load("d", lambda: "d")
    assert len(backend) == 3
    assert backend.get("b") is None and backend.get("a") is not None


def test_redis_backend_shares_entries_as_json(pgsteady_redis):
    """Two caches over one Redis share entries; values travel as JSON, not pickle."""
    first = StaleCache(RedisBackend(pgsteady_redis.url), fresh_for=60, stale_for=120)
    second = StaleCache(RedisBackend(pgsteady_redis.url), fresh_for=60, stale_for=120)
    assert first.get_or_load("stats:public", lambda: {"requests": 42}) == {"requests": 42}
    assert second.lookup("stats:public", lambda: pytest.fail("loaded again")).value == \
        {"requests": 42}
    with pgsteady_redis.client() as client:
        raw = client.get("pgsteady:stats:public")
    assert raw.split(b"|", 1)[1] == b'{"requests": 42}'


def test_redis_down_falls_back_to_the_loader(pgsteady_redis):
    """Redis stopped: the backend raises one clear PgsteadyError, and a StaleCache over it
    calls the loader instead of failing (a cache outage is not a service outage)."""
    backend = RedisBackend(pgsteady_redis.url, timeout=0.2)
    cache = StaleCache(backend, fresh_for=60, stale_for=120)
    cache.get_or_load("k", lambda: 1)
    pgsteady_redis.stop()
    with pytest.raises(CacheUnavailable) as info:
        backend.get("k")
    assert isinstance(info.value, PgsteadyError)
    assert "\n" not in str(info.value) and pgsteady_redis.url not in str(info.value)
    assert "***" in str(info.value)
    start = time.monotonic()
    assert cache.get_or_load("k", lambda: 2) == 2
    assert time.monotonic() - start < 1.0
    stats = cache.stats()  # backend.get above opened the breaker: neither call went to Redis
    assert (stats.backend_errors, stats.backend_skipped, stats.backend_state) == (0, 2, "open")

    async def main() -> int:
        acache = AsyncStaleCache(RedisBackend(pgsteady_redis.url, timeout=0.2),
                                 fresh_for=60, stale_for=120)
        return await acache.get_or_load("k", _const(3))

    assert asyncio.run(main()) == 3


def test_async_gateway_lookup_through_a_blackhole(pgsteady_proxy):
    """The asyncio twin: AsyncDatabase + AsyncStaleCache + the same breaker — stale under
    10 ms at p99, CircuitOpen under 100 ms, fresh again and closed after the black hole."""
    breaker = CircuitBreaker("orgs-db", min_calls=3, window=10, open_for=0.5)

    async def main() -> None:
        cache = AsyncStaleCache(fresh_for=0.05, stale_for=300)
        async with AsyncDatabase(_dsn(pgsteady_proxy), pool_size=2, breaker=breaker,
                                 connect_timeout=2) as db:
            await db.wait(10)

            def settings(org: int):
                async def load() -> dict:
                    row = await db.fetchone("select %s::int * 10", (org,), deadline=0.2)
                    return {"org": org, "limit": row[0]}
                return load

            assert await cache.get_or_load("org:1", settings(1)) == {"org": 1, "limit": 10}
            await asyncio.sleep(0.06)
            pgsteady_proxy.blackhole(True)
            for org in (2, 3):
                with pytest.raises(DeadlineExceeded):
                    await cache.get_or_load(f"org:{org}", settings(org))
            assert breaker.state == "open"
            took = []
            for _ in range(300):
                start = time.perf_counter()
                served = await cache.lookup("org:1", settings(1))
                took.append(time.perf_counter() - start)
                assert served.stale and served.value == {"org": 1, "limit": 10}
            assert _p99(took) < 0.1  # served at once: none waited for the 0.2 s database deadline
            start = time.monotonic()
            with pytest.raises(CircuitOpen):
                await cache.get_or_load("org:5", settings(5))
            assert time.monotonic() - start < 0.100
            pgsteady_proxy.blackhole(False)
            await asyncio.sleep(0.6)
            served = await cache.lookup("org:5", settings(5))
            assert (served.value, served.stale) == ({"org": 5, "limit": 50}, False)
            assert breaker.state == "closed"

    asyncio.run(main())


def test_a_redis_outage_is_logged_once_and_served_from_memory(pgsteady_redis, caplog):
    """Redis stopped: one failed call opens the backend's breaker (one warning from it, one
    from the cache), the other 20 calls are skipped, and the key loads once, then comes
    from this process's memory."""
    cache = StaleCache(RedisBackend(pgsteady_redis.url, timeout=0.2), fresh_for=60,
                       stale_for=60)
    calls = []
    with caplog.at_level("WARNING", logger="pgsteady.guards"):
        pgsteady_redis.stop()
        for _ in range(20):
            assert cache.get_or_load("k", lambda: calls.append(1) or (1, 2)) == (1, 2)
    assert len(calls) == 1
    assert sum("backend failed" in r.message for r in caplog.records) == 1
    assert sum("-> open" in r.message for r in caplog.records) == 1
    stats = cache.stats()
    assert (stats.backend_errors, stats.backend_skipped, stats.fresh_hits) == (1, 20, 19)


def test_async_decorator_and_invalidate():
    """@AsyncStaleCache.cached caches per key; invalidate() makes the next call load again."""
    calls = []

    async def main() -> None:
        cache = AsyncStaleCache(fresh_for=60, stale_for=60)

        @cache.cached(key=lambda org_id: f"org:{org_id}")
        async def org(org_id: int) -> dict:
            calls.append(org_id)
            return {"id": org_id}

        assert await org(1) == {"id": 1} and await org(1) == {"id": 1}
        await cache.invalidate("org:1")
        assert await org(1) == {"id": 1}
        assert cache.stats().fresh_hits == 1 and cache.stats().loads == 2

    asyncio.run(main())
    assert calls == [1, 1]


def _redis_calls(backend: RedisBackend) -> int:
    """Commands that reached Redis (answered or failed), as its breaker counted them."""
    return backend.breaker.stats().calls


def test_hung_redis_costs_one_timeout_then_is_not_asked(pgsteady_redis, caplog):
    """Redis SIGSTOPped: the first lookup pays one 0.25 s GET timeout (not a GET and a SET),
    the next 100 never touch Redis and load once from memory's fallback; a probe after
    open_for times out once more; after SIGCONT the next probe closes the breaker and the
    value is Redis' again."""
    backend = RedisBackend(pgsteady_redis.url, timeout=0.25,
                           breaker=CircuitBreaker("redis", consecutive_failures=1,
                                                  open_for=0.5))
    cache = StaleCache(backend, fresh_for=60, stale_for=120)
    assert cache.get_or_load("org:1", lambda: {"plan": "pro"}) == {"plan": "pro"}
    before = _redis_calls(backend)
    loads = []
    with caplog.at_level("INFO", logger="pgsteady.guards"), pgsteady_redis.hung():
        start = time.monotonic()
        assert cache.get_or_load("org:1", lambda: loads.append(1) or {"plan": "db"}) == \
            {"plan": "db"}
        first = time.monotonic() - start
        assert _redis_calls(backend) == before + 1  # the GET; the SET was not tried
        assert cache.stats().backend_state == "open"
        start = time.monotonic()
        for _ in range(100):
            assert cache.get_or_load("org:1", lambda: loads.append(1) or {}) == {"plan": "db"}
        steady = time.monotonic() - start
        assert _redis_calls(backend) == before + 1 and loads == [1]
        time.sleep(0.55)  # open_for passed: the next lookup is the one probe
        cache.get_or_load("org:1", dict)
        assert _redis_calls(backend) == before + 2
        assert cache.stats().backend_state == "open"
    assert first >= 0.25  # it did wait for the GET's timeout (main also waited for the SET's)
    assert steady < 0.5  # 100 lookups in less than one old lookup's 0.5 s
    time.sleep(0.55)
    assert cache.get_or_load("org:1", dict) == {"plan": "pro"}  # Redis' entry again
    assert cache.stats().backend_state == "closed"
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert sum("-> open" in r.message for r in warnings) == 1  # one per outage, not per probe
    stats = cache.stats()
    assert (stats.backend_errors, stats.loads) == (2, 2)


def test_async_hung_redis_costs_one_timeout_then_is_not_asked(pgsteady_redis):
    """AsyncStaleCache on a SIGSTOPped Redis: one GET timeout on the first lookup, then 100
    lookups that neither touch Redis nor load again; back to Redis after SIGCONT."""
    async def main() -> None:
        backend = RedisBackend(pgsteady_redis.url, timeout=0.25,
                               breaker=CircuitBreaker("redis", consecutive_failures=1,
                                                      open_for=0.5))
        cache = AsyncStaleCache(backend, fresh_for=60, stale_for=120)
        assert await cache.get_or_load("org:1", _const((1, "pro"))) == (1, "pro")
        before = _redis_calls(backend)
        with pgsteady_redis.hung():
            start = time.monotonic()
            assert await cache.get_or_load("org:1", _const((1, "db"))) == (1, "db")
            first = time.monotonic() - start
            start = time.monotonic()
            for _ in range(100):
                assert await cache.get_or_load("org:1", _const(None)) == (1, "db")
            steady = time.monotonic() - start
            assert _redis_calls(backend) == before + 1
        assert first >= 0.25 and steady < 0.5  # main: 0.5 s for each of the 101
        stats = cache.stats()
        assert (stats.loads, stats.backend_skipped, stats.backend_state) == (2, 101, "open")
        await asyncio.sleep(0.55)
        assert await cache.get_or_load("org:1", _const(None)) == (1, "pro")
        assert cache.stats().backend_state == "closed"
        await backend.aclose()

    asyncio.run(main())
