"""Where guards keep their state: in this process (``MemoryBackend``) or in Redis, shared by
every process of a fleet (``RedisBackend``).

A backend stores two kinds of things: cache entries (a payload and its age) for
:class:`~pgsteady.guards.StaleCache`, and leased slots per key for
:class:`~pgsteady.guards.KeyedLimiter`. Every operation has a sync and an ``a``-prefixed
asyncio form, so one backend object serves both twins.

Redis is reached with short socket timeouts: a cache that hangs would turn a cache outage
into a service outage, and a breaker stops asking one that failed until a probe succeeds.
Every Redis failure surfaces as one :class:`CacheUnavailable`.

After ``os.fork`` (gunicorn ``--preload``, Celery's prefork pool) each live backend resets
itself in the child: fresh locks (the parent's may be held by a thread that does not exist
there), no inherited slots, a breaker window of its own, and new Redis clients. redis-py's
sync pool notices a fork by itself, but its asyncio pool does not: a child would write on the
parent's sockets, from another event loop.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from pgsteady import _checks
from pgsteady._extras import needs
from pgsteady.errors import CacheUnavailable, CircuitOpen, UsageError
from pgsteady.guards.breaker import CircuitBreaker

if TYPE_CHECKING:
    import redis
    import redis.asyncio

T = TypeVar("T")

_LIVE: weakref.WeakSet[MemoryBackend | RedisBackend] = weakref.WeakSet()
_INHERITED: list[Any] = []
"""A child's inherited Redis clients, kept alive so no finaliser closes a parent's socket."""


def _after_fork_in_child() -> None:
    for backend in list(_LIVE):
        backend._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


@runtime_checkable
class Backend(Protocol):
    """What :class:`StaleCache` and :class:`KeyedLimiter` need from a store."""

    stores_objects: bool
    """True: payloads are kept as Python objects (no codec); False: they are bytes."""

    def get(self, key: str) -> tuple[Any, float] | None: ...
    def set(self, key: str, payload: Any, ttl: float) -> None: ...
    def delete(self, key: str) -> None: ...
    def acquire(self, key: str, holder: str, limit: int, lease: float) -> float | None: ...
    def renew(self, key: str, holder: str, lease: float) -> bool: ...
    def release(self, key: str, holder: str) -> None: ...
    async def aget(self, key: str) -> tuple[Any, float] | None: ...
    async def aset(self, key: str, payload: Any, ttl: float) -> None: ...
    async def adelete(self, key: str) -> None: ...
    async def aacquire(self, key: str, holder: str, limit: int,
                       lease: float) -> float | None: ...
    async def arenew(self, key: str, holder: str, lease: float) -> bool: ...
    async def arelease(self, key: str, holder: str) -> None: ...


class MemoryBackend:
    """A bounded LRU in this process (least recently used entries go first), and per-key
    slots with leases. Values are kept as the objects you gave: do not mutate what you get.
    """

    stores_objects = True

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = _checks.whole(max_entries, "max_entries")
        self._lock = threading.Lock()
        # key -> (value, stored_at, expires_at), monotonic clock
        self._entries: OrderedDict[str, tuple[Any, float, float]] = OrderedDict()
        self._slots: dict[str, dict[str, float]] = {}  # key -> holder -> lease end
        _LIVE.add(self)

    def _after_fork(self) -> None:
        """In a forked child: a new lock; the entries stay (a copy), the parent's leases go."""
        self._lock = threading.Lock()
        self._slots = {}

    def __len__(self) -> int:
        return len(self._entries)

    # -- cache ---------------------------------------------------------------------------

    def get(self, key: str) -> tuple[Any, float] | None:
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if now >= entry[2]:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
        return entry[0], now - entry[1]

    def set(self, key: str, payload: Any, ttl: float) -> None:
        now = time.monotonic()
        with self._lock:
            self._entries[key] = (payload, now, now + ttl)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def delete(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)

    # -- slots ---------------------------------------------------------------------------

    def acquire(self, key: str, holder: str, limit: int, lease: float) -> float | None:
        """Take a slot: None if taken, else the seconds until the first lease ends."""
        now = time.monotonic()
        with self._lock:
            holders = self._slots.setdefault(key, {})
            for other, until in list(holders.items()):
                if until <= now:
                    del holders[other]
            if holder in holders or len(holders) < limit:
                holders[holder] = now + lease
                return None
            return max(0.0, min(holders.values()) - now)

    def renew(self, key: str, holder: str, lease: float) -> bool:
        with self._lock:
            holders = self._slots.get(key, {})
            if holder not in holders:
                return False
            holders[holder] = time.monotonic() + lease
            return True

    def release(self, key: str, holder: str) -> None:
        with self._lock:
            holders = self._slots.get(key)
            if holders is not None:
                holders.pop(holder, None)
                if not holders:
                    del self._slots[key]

    def holders(self, key: str) -> int:
        """How many live slots ``key`` has now (for tests and stats)."""
        now = time.monotonic()
        with self._lock:
            return sum(1 for until in self._slots.get(key, {}).values() if until > now)

    # -- asyncio: the same, nothing here blocks ------------------------------------------

    async def aget(self, key: str) -> tuple[Any, float] | None:
        return self.get(key)

    async def aset(self, key: str, payload: Any, ttl: float) -> None:
        self.set(key, payload, ttl)

    async def adelete(self, key: str) -> None:
        self.delete(key)

    async def aacquire(self, key: str, holder: str, limit: int, lease: float) -> float | None:
        return self.acquire(key, holder, limit, lease)

    async def arenew(self, key: str, holder: str, lease: float) -> bool:
        return self.renew(key, holder, lease)

    async def arelease(self, key: str, holder: str) -> None:
        self.release(key, holder)


# Slots live in a sorted set per key: member = holder, score = lease end (Redis' own clock,
# so hosts with skewed clocks agree). Expired leases are dropped before every decision.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit, holder, lease = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], holder) or redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now + lease, holder)
  redis.call('PEXPIREAT', KEYS[1], tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2]))
  return -1
end
return tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]) - now
"""

_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) <= now then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIREAT', KEYS[1], tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2]))
return 1
"""


def redact_url(url: str) -> str:
    """A Redis URL with its password replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def _pack(payload: bytes) -> bytes:
    # The store time travels with the value: one GET gives both (a hit is one round trip).
    return b"%.6f|" % time.time() + payload


def _unpack(raw: bytes) -> tuple[bytes, float]:
    """(payload, age); ValueError for a value pgsteady did not write (the cache's miss): a
    NaN, infinite or future stamp would otherwise read as age 0, fresh for ever."""
    stamp, bar, payload = raw.partition(b"|")
    age = time.time() - float(stamp)
    if not bar or not math.isfinite(age) or age < -_CLOCK_SKEW:
        raise ValueError("not a pgsteady cache entry (no valid time stamp)")
    return payload, max(0.0, age)


_CLOCK_SKEW = 60.0
"""Seconds a stamp may lie in the future (another host's clock ahead of this one's)."""


class RedisBackend:
    """The shared store: cache entries and slots in Redis, for every process that uses the
    same ``url`` and ``prefix``.

    Ages are measured with the hosts' wall clocks (keep them in sync, as NTP does); lease
    ends with Redis' own clock. ``timeout`` bounds every command: a Redis that does not
    answer costs at most that, and raises :class:`CacheUnavailable` (a ``StaleCache`` then
    goes to its loader; a ``KeyedLimiter`` follows its ``on_backend_error``).

    ``breaker`` stops asking a Redis that failed: without it, a hung Redis cost every cache
    lookup a GET and a SET timeout, forever. The default opens on the first connection
    failure or timeout (``consecutive_failures=1``), raises :class:`CacheUnavailable` at
    once (its ``__cause__`` a :class:`CircuitOpen`) for ``open_for`` = 5 s, then lets one
    probe through. Errors Redis answers with (a bad script, a wrong type) do not count.
    The asyncio client binds to the first event loop that uses it: one loop per backend.
    """

    stores_objects = False

    def __init__(self, url: str, *, prefix: str = "pgsteady:", timeout: float = 0.25,
                 breaker: CircuitBreaker | None = None,
                 client: redis.Redis | None = None,
                 async_client: redis.asyncio.Redis | None = None) -> None:
        with needs("redis", "RedisBackend"):
            import redis as redis_sync  # noqa: PLC0415 - the redis extra is optional
            import redis.asyncio as redis_async  # noqa: PLC0415

        if not isinstance(url, str):
            raise UsageError(f"url must be a Redis URL string such as redis://host:6379/0, "
                             f"got {type(url).__name__}")
        if timeout <= 0:
            raise UsageError(f"timeout must be positive, got {timeout!r}")
        if breaker is not None and not isinstance(breaker, CircuitBreaker):
            raise UsageError(f"breaker must be a CircuitBreaker or None, got "
                             f"{type(breaker).__name__}")
        self.url = redact_url(url)
        self.prefix = prefix
        self.breaker = breaker or CircuitBreaker(f"redis {self.url}", consecutive_failures=1,
                                                 open_for=5.0)
        self._errors: tuple[type[BaseException], ...] = (redis_sync.RedisError, OSError)
        # Not answering (as opposed to answering with an error): what opens the breaker.
        self._outages: tuple[type[BaseException], ...] = (
            redis_sync.ConnectionError, redis_sync.TimeoutError, OSError)
        options: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout,
                                   "retry_on_timeout": False}
        try:
            self.client = client or redis_sync.Redis.from_url(url, **options)
            self.async_client = async_client or redis_async.Redis.from_url(url, **options)
        except ValueError as exc:
            raise UsageError(f"bad Redis URL {self.url}: {exc}; use "
                             f"redis://[:password@]host:port/db or unix:///path") from None
        self._scripts()
        _LIVE.add(self)

    def _scripts(self) -> None:
        self._acquire = self.client.register_script(_ACQUIRE)
        self._renew = self.client.register_script(_RENEW)
        self._aacquire = self.async_client.register_script(_ACQUIRE)
        self._arenew = self.async_client.register_script(_RENEW)

    def _after_fork(self) -> None:
        """In a forked child: clients of its own (same class and settings, new pools), the
        scripts registered on them, and a fresh breaker window and lock."""
        import redis as redis_sync  # noqa: PLC0415 - loaded already: __init__ imported it
        import redis.asyncio as redis_async  # noqa: PLC0415

        _INHERITED.extend((self.client, self.async_client))
        old, aold = self.client.connection_pool, self.async_client.connection_pool
        self.client = redis_sync.Redis(connection_pool=type(old)(
            connection_class=old.connection_class, max_connections=old.max_connections,
            **old.connection_kwargs))
        self.async_client = redis_async.Redis(connection_pool=type(aold)(
            connection_class=aold.connection_class, max_connections=aold.max_connections,
            **aold.connection_kwargs))
        self._scripts()
        self.breaker.after_fork()

    def _failed(self, exc: BaseException) -> CacheUnavailable:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        error = CacheUnavailable(f"Redis at {self.url} failed: {first}")
        error.__cause__ = exc
        return error

    def _ticket(self) -> int:
        """The breaker's ticket for one command, or :class:`CacheUnavailable` if it is open."""
        try:
            return self.breaker.allow()
        except CircuitOpen as exc:
            error = CacheUnavailable(f"Redis at {self.url} is not asked for "
                                     f"{exc.retry_after:.1f} s more: it failed or did not "
                                     f"answer")
            error.__cause__ = exc
            raise error from exc

    def _settle(self, ticket: int, exc: BaseException | None) -> None:
        if exc is None:
            self.breaker.settle(ticket, "success")
        elif isinstance(exc, self._outages):
            self.breaker.settle(ticket, "failure")
        else:  # Redis answered (a script or type error), or we were cancelled
            self.breaker.settle(ticket, "success" if isinstance(exc, Exception) else "neutral")

    def _call(self, command: Callable[[], T]) -> T:
        ticket = self._ticket()
        try:
            result = command()
        except self._errors as exc:
            self._settle(ticket, exc)
            raise self._failed(exc) from exc
        except BaseException as exc:
            self._settle(ticket, exc)
            raise
        self._settle(ticket, None)
        return result

    async def _acall(self, command: Callable[[], Awaitable[T]]) -> T:
        ticket = self._ticket()
        try:
            result = await command()
        except self._errors as exc:
            self._settle(ticket, exc)
            raise self._failed(exc) from exc
        except BaseException as exc:
            self._settle(ticket, exc)
            raise
        self._settle(ticket, None)
        return result

    def close(self) -> None:
        self.client.close()

    async def aclose(self) -> None:
        await self.async_client.aclose()

    # -- cache ---------------------------------------------------------------------------

    def get(self, key: str) -> tuple[Any, float] | None:
        raw = self._call(lambda: self.client.get(self.prefix + key))
        return None if raw is None else _unpack(raw)  # type: ignore[arg-type]

    def set(self, key: str, payload: Any, ttl: float) -> None:
        self._call(lambda: self.client.set(self.prefix + key, _pack(payload),
                                           px=max(1, int(ttl * 1000))))

    def delete(self, key: str) -> None:
        self._call(lambda: self.client.delete(self.prefix + key))

    async def aget(self, key: str) -> tuple[Any, float] | None:
        raw = await self._acall(lambda: self.async_client.get(self.prefix + key))
        return None if raw is None else _unpack(raw)  # type: ignore[arg-type]

    async def aset(self, key: str, payload: Any, ttl: float) -> None:
        await self._acall(lambda: self.async_client.set(self.prefix + key, _pack(payload),
                                                        px=max(1, int(ttl * 1000))))

    async def adelete(self, key: str) -> None:
        await self._acall(lambda: self.async_client.delete(self.prefix + key))

    # -- slots ---------------------------------------------------------------------------

    def _slot_key(self, key: str) -> str:
        return f"{self.prefix}slots:{key}"

    def acquire(self, key: str, holder: str, limit: int, lease: float) -> float | None:
        wait_ms = int(self._call(lambda: self._acquire(
            keys=[self._slot_key(key)], args=[limit, holder, max(1, int(lease * 1000))])))
        return None if wait_ms < 0 else wait_ms / 1000

    def renew(self, key: str, holder: str, lease: float) -> bool:
        return bool(self._call(lambda: self._renew(
            keys=[self._slot_key(key)], args=[holder, max(1, int(lease * 1000))])))

    def release(self, key: str, holder: str) -> None:
        self._call(lambda: self.client.zrem(self._slot_key(key), holder))

    def holders(self, key: str) -> int:
        """How many unexpired slots ``key`` has now."""
        def count() -> int:
            now_s, now_us = self.client.time()
            now_ms = now_s * 1000 + now_us // 1000
            return int(self.client.zcount(self._slot_key(key), f"({now_ms}", "+inf"))
        return self._call(count)

    async def aacquire(self, key: str, holder: str, limit: int, lease: float) -> float | None:
        wait_ms = int(await self._acall(lambda: self._aacquire(
            keys=[self._slot_key(key)], args=[limit, holder, max(1, int(lease * 1000))])))
        return None if wait_ms < 0 else wait_ms / 1000

    async def arenew(self, key: str, holder: str, lease: float) -> bool:
        return bool(await self._acall(lambda: self._arenew(
            keys=[self._slot_key(key)], args=[holder, max(1, int(lease * 1000))])))

    async def arelease(self, key: str, holder: str) -> None:
        await self._acall(lambda: self.async_client.zrem(self._slot_key(key), holder))
