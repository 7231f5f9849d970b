"""``StaleCache`` / ``AsyncStaleCache``: serve what you have when the source does not answer.

Seed 002: uncached gateway lookups waited 10 s and failed while a cached copy of the same
settings sat one lookup away. Here an entry is *fresh* for ``fresh_for`` seconds (served
without calling the loader), then *stale* until ``stale_for``: the loader runs again, and if
it fails with an outage-shaped error (``stale_on``: cannot connect, deadline, overloaded,
connection failed, circuit open, plus any you list) the stale entry is served instead and
counted. A failure is never stored: the next call tries the loader again.

Loads are single-flight per key and process: while one caller loads a key, the others get
the stale entry at once if there is one, or wait (within their deadline) for that load.

The sync and async caches share :class:`_Rules` (decisions and counters, no I/O) and differ
only in how they wait. A cache over :class:`RedisBackend` that cannot reach Redis keeps
entries in a local :class:`MemoryBackend` of ``max_entries`` instead (and calls the loader
for what it lacks): a cache outage must not become a service outage. The backend's breaker
makes that cost at most one Redis timeout per outage and probe, not two per lookup.

Values pass through ``codec`` (:class:`TypedJson` by default) with every backend: a value
comes back from Redis as the types it went in with, and one the codec cannot keep raises
:class:`TypeError` when it is loaded, from the memory backend too.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

from pgsteady.errors import (
    CacheUnavailable,
    CannotConnect,
    CircuitOpen,
    DeadlineExceeded,
    Overloaded,
    QueryFailed,
    UsageError,
)
from pgsteady.guards._quiet import QuietLog
from pgsteady.guards.backends import Backend, MemoryBackend
from pgsteady.guards.codec import TYPED_JSON
from pgsteady.settings import Duration, to_seconds

log = logging.getLogger("pgsteady.guards")

T = TypeVar("T")
P = ParamSpec("P")

STALE_ON: tuple[type[BaseException], ...] = (
    CannotConnect, DeadlineExceeded, Overloaded, QueryFailed, CircuitOpen)
"""Loader errors that mean "the source did not answer": a stale entry is served instead."""

LONGEST_WAIT_FOR_LOAD = 60.0
"""Without a deadline, a caller waits at most this long for another caller's load."""


class Codec(Protocol):
    """How values become bytes for a shared backend (:class:`TypedJson` by default: never
    pickle what a shared cache hands back). ``dumps`` raising TypeError or ValueError refuses
    a value, with every backend."""

    def dumps(self, obj: Any) -> str | bytes: ...
    def loads(self, s: str | bytes) -> Any: ...


@dataclass(frozen=True, slots=True)
class Served(Generic[T]):
    """What :meth:`StaleCache.lookup` returns: the value, whether it is stale, and its age
    in seconds (0 for a value just loaded)."""

    value: T
    stale: bool
    age: float


@dataclass(frozen=True)
class CacheStats:
    """Counters since the cache was made, and the state of the backend's breaker (a
    :class:`RedisBackend`'s; ``closed`` for memory): ``open`` means Redis is not asked."""

    fresh_hits: int
    loads: int
    load_failures: int
    served_stale: int
    waited_for_load: int
    backend_errors: int
    backend_skipped: int
    backend_state: str


class _Flight:
    """One load in progress for a key; others wait on it instead of loading again."""

    __slots__ = ("done", "error", "future", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self.future: asyncio.Future[Any] | None = None


class _Rules:
    """Everything both caches decide the same way: freshness, encoding, counting."""

    def __init__(self, backend: Backend | None, *, fresh_for: Duration, stale_for: Duration,
                 max_entries: int, codec: Codec,
                 stale_on: tuple[type[BaseException], ...]) -> None:
        fresh = to_seconds(fresh_for, "fresh_for")
        stale = to_seconds(stale_for, "stale_for")
        if fresh is None or stale is None or stale < fresh:
            raise UsageError(f"need fresh_for <= stale_for, both in seconds; got fresh_for="
                             f"{fresh_for!r}, stale_for={stale_for!r}")
        self.fresh_for, self.stale_for = fresh, stale
        if backend is not None and not isinstance(backend, Backend):
            raise UsageError(f"backend must be a MemoryBackend, a RedisBackend or None, got "
                             f"{type(backend).__name__} {backend!r}")
        self.backend: Backend = backend if backend is not None else MemoryBackend(max_entries)
        self.codec = codec
        self.stale_on = STALE_ON + tuple(stale_on)
        self._encoded = not self.backend.stores_objects
        self.objects = not self._encoded
        # While a shared backend is away, entries live here (encoded, like in Redis).
        self.local = MemoryBackend(max_entries) if self._encoded else None
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        self._counts = dict.fromkeys(
            ("fresh_hits", "loads", "load_failures", "served_stale", "waited_for_load",
             "backend_errors", "backend_skipped"), 0)
        self.note = QuietLog(log).note  # one of each kind per QUIET_FOR seconds

    def count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    def hit(self) -> None:
        with self._lock:
            self._counts["fresh_hits"] += 1

    def stats(self) -> CacheStats:
        breaker = getattr(self.backend, "breaker", None)
        state = "closed" if breaker is None else breaker.state
        with self._lock:
            return CacheStats(**self._counts, backend_state=state)

    def encode(self, key: str, value: Any) -> Any:
        """The payload to store; :class:`TypeError` if the codec refuses the value, with
        every backend (the memory backend keeps the object, but only one Redis could keep:
        code tested on one backend must not break on the other)."""
        check = None if self._encoded else getattr(self.codec, "check", None)
        try:
            data = check(value) if check is not None else self.codec.dumps(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"cannot cache {key!r}: {exc}") from exc
        if not self._encoded:
            return value
        return data.encode() if isinstance(data, str) else data

    def entry(self, found: tuple[Any, float] | None, key: str) -> Served[Any] | None:
        """A usable entry (younger than ``stale_for``) from what the backend returned."""
        if found is None or found[1] >= self.stale_for:
            return None
        payload, age = found
        if self._encoded:
            decoded, payload = self.decode(key, payload)
            if not decoded:
                return None
        return Served(payload, age >= self.fresh_for, age)

    def decode(self, key: str, payload: Any) -> tuple[bool, Any]:
        """``(True, value)``, or ``(False, None)`` for an entry the codec cannot read."""
        try:
            return True, self.codec.loads(payload)
        except Exception as exc:  # whatever a shared store holds: a miss, never a crash
            self.foreign(key, exc)
            return False, None

    def foreign(self, key: str, exc: Exception) -> None:
        """An entry this cache did not write (damaged, or another program's under the same
        key) is a miss: the loader runs and its value overwrites the entry. A bad entry
        stays until then on every process that shares it, hence one warning per period."""
        self.note("foreign", logging.WARNING,
                  "cache entry %r is not one this cache wrote (%s); treated as a miss: "
                  "loaded again and overwritten", key,
                  str(exc)[:200] or type(exc).__name__)

    def backend_failed(self, exc: CacheUnavailable, doing: str) -> None:
        if isinstance(exc.__cause__, CircuitOpen):  # not asked: its breaker logs the outage
            self.count("backend_skipped")
            return
        self.count("backend_errors")
        self.note("backend", logging.WARNING,
                  "cache backend failed while %s; using this process's memory and the "
                  "source until it answers: %s", doing, str(exc))

    def read_locally(self, exc: CacheUnavailable, key: str) -> tuple[Any, float] | None:
        """After the shared backend failed to read ``key``: what this process kept."""
        self.backend_failed(exc, f"reading {key!r}")
        return None if self.local is None else self.local.get(key)

    def store_locally(self, exc: CacheUnavailable, key: str, payload: Any) -> None:
        self.backend_failed(exc, f"storing {key!r}")
        if self.local is not None:
            self.local.set(key, payload, self.stale_for)

    def join(self, key: str) -> tuple[_Flight, bool]:
        """The flight loading ``key`` and whether we lead it (we must then run the loader)."""
        with self._lock:
            flight = self._flights.get(key)
            if flight is not None:
                return flight, False
            flight = self._flights[key] = _Flight()
            return flight, True

    def land(self, key: str, flight: _Flight) -> None:
        with self._lock:
            if self._flights.get(key) is flight:
                del self._flights[key]
        flight.done.set()

    def fallback(self, exc: BaseException, entry: Served[Any] | None) -> Served[Any]:
        """After a failed load: the stale entry if the error allows it, else re-raise."""
        self.count("load_failures")
        if entry is not None and isinstance(exc, self.stale_on):
            self.count("served_stale")
            self.note("stale", logging.WARNING,
                      "serving stale entries because loads fail (this one %.1f s old): %s",
                      entry.age, str(exc))  # text: a record must not keep frames alive
            return Served(entry.value, True, entry.age)
        raise exc

    def key_for(self, fn: Callable[..., Any], key: str | Callable[..., str] | None,
                args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        if key is None:
            return f"{fn.__module__}.{fn.__qualname__}:" + json.dumps(
                [args, kwargs], default=repr, sort_keys=True, separators=(",", ":"))
        if isinstance(key, str):
            return key.format(*args, **kwargs)
        return key(*args, **kwargs)


def _waited_too_long(budget: float, start: float) -> DeadlineExceeded:
    return DeadlineExceeded("queued", budget, time.monotonic() - start)


class StaleCache:
    """A stale-on-error, single-flight cache for sync code (see the module docstring).

    ``backend`` defaults to a :class:`MemoryBackend` of ``max_entries``; pass a
    :class:`RedisBackend` to share entries across processes (``max_entries`` then bounds
    the local fallback used while Redis is away). Values pass through ``codec``.
    The sync loader runs in the calling thread: give it its own deadline (``Database`` calls
    take one); ``deadline`` here bounds waiting for another caller's load.
    """

    def __init__(self, backend: Backend | None = None, *, fresh_for: Duration,
                 stale_for: Duration, max_entries: int = 10_000, codec: Codec = TYPED_JSON,
                 stale_on: tuple[type[BaseException], ...] = ()) -> None:
        self._rules = _Rules(backend, fresh_for=fresh_for, stale_for=stale_for,
                             max_entries=max_entries, codec=codec, stale_on=stale_on)
        self.backend = self._rules.backend

    def stats(self) -> CacheStats:
        return self._rules.stats()

    def get_or_load(self, key: str, loader: Callable[[], T], *,
                    deadline: Duration = None) -> T:
        """The value for ``key``: cached, freshly loaded, or stale if the load failed."""
        rules = self._rules
        found = self._found(key)
        if found is not None and found[1] < rules.fresh_for:  # the hot path: a fresh hit
            value: T
            if rules.objects:
                rules.hit()
                value = found[0]
                return value
            decoded, value = rules.decode(key, found[0])
            if not decoded:  # logged: a miss
                return self._lookup(key, loader, deadline, None).value
            rules.hit()
            return value
        served: T = self._lookup(key, loader, deadline, rules.entry(found, key)).value
        return served

    def lookup(self, key: str, loader: Callable[[], T], *,
               deadline: Duration = None) -> Served[T]:
        """Like :meth:`get_or_load`, but says whether the value is stale and how old."""
        return self._lookup(key, loader, deadline, self._read(key))

    def _lookup(self, key: str, loader: Callable[[], T], deadline: Duration,
                entry: Served[Any] | None) -> Served[T]:
        rules = self._rules
        if entry is not None and not entry.stale:
            rules.hit()
            return entry
        start = time.monotonic()
        flight, leader = rules.join(key)
        if not leader:
            if entry is not None:  # someone is loading it; the stale copy serves meanwhile
                rules.count("served_stale")
                return entry
            rules.count("waited_for_load")
            budget = to_seconds(deadline, "deadline")
            if budget is None:
                budget = LONGEST_WAIT_FOR_LOAD
            if not flight.done.wait(budget):
                raise _waited_too_long(budget, start)
            if flight.error is not None:
                raise flight.error
            return Served(flight.value, False, time.monotonic() - start)
        try:
            rules.count("loads")
            try:
                value = loader()
            except BaseException as exc:
                flight.error = exc
                if not isinstance(exc, Exception):
                    raise
                return rules.fallback(exc, entry)
            try:
                payload = rules.encode(key, value)
            except TypeError as exc:
                flight.error = exc
                raise
            flight.value = value
            self._store(key, payload)
            return Served(value, False, 0.0)
        finally:
            rules.land(key, flight)

    def _read(self, key: str) -> Served[Any] | None:
        return self._rules.entry(self._found(key), key)

    def _found(self, key: str) -> tuple[Any, float] | None:
        try:
            return self.backend.get(key)
        except CacheUnavailable as exc:
            return self._rules.read_locally(exc, key)
        except ValueError as exc:  # RedisBackend: a value in no entry's shape (see foreign)
            self._rules.foreign(key, exc)
            return None

    def _store(self, key: str, payload: Any) -> None:
        try:
            self.backend.set(key, payload, self._rules.stale_for)
        except CacheUnavailable as exc:
            self._rules.store_locally(exc, key, payload)

    def invalidate(self, key: str) -> None:
        """Forget ``key`` (the next lookup loads it)."""
        if self._rules.local is not None:
            self._rules.local.delete(key)
        try:
            self.backend.delete(key)
        except CacheUnavailable as exc:
            self._rules.backend_failed(exc, f"deleting {key!r}")

    def cached(self, key: str | Callable[..., str] | None = None, *,
               deadline: Duration = None) -> Callable[[Callable[P, T]], Callable[P, T]]:
        """Decorate a loader function: ``@cache.cached(key="org:{0}")``. ``key`` is a format
        string over the call's arguments, a function of them, or None (name + arguments)."""
        def decorate(fn: Callable[P, T]) -> Callable[P, T]:
            @functools.wraps(fn)
            def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
                name = self._rules.key_for(fn, key, args, kwargs)
                return self.get_or_load(name, lambda: fn(*args, **kwargs), deadline=deadline)
            return wrapper
        return decorate


class AsyncStaleCache:
    """:class:`StaleCache` for asyncio. Here ``deadline`` bounds the whole lookup: a load
    that outlives it keeps running in the background and fills the cache when it ends,
    while the caller gets the stale entry (if any) or :class:`DeadlineExceeded`."""

    def __init__(self, backend: Backend | None = None, *, fresh_for: Duration,
                 stale_for: Duration, max_entries: int = 10_000, codec: Codec = TYPED_JSON,
                 stale_on: tuple[type[BaseException], ...] = ()) -> None:
        self._rules = _Rules(backend, fresh_for=fresh_for, stale_for=stale_for,
                             max_entries=max_entries, codec=codec, stale_on=stale_on)
        self.backend = self._rules.backend
        self._loads: set[asyncio.Task[Any]] = set()

    def stats(self) -> CacheStats:
        return self._rules.stats()

    async def get_or_load(self, key: str, loader: Callable[[], Awaitable[T]], *,
                          deadline: Duration = None) -> T:
        served: T = (await self.lookup(key, loader, deadline=deadline)).value
        return served

    async def lookup(self, key: str, loader: Callable[[], Awaitable[T]], *,
                     deadline: Duration = None) -> Served[T]:
        rules = self._rules
        entry = await self._read(key)
        if entry is not None and not entry.stale:
            rules.hit()
            return entry
        start = time.monotonic()
        budget = to_seconds(deadline, "deadline")
        flight, leader = rules.join(key)
        if not leader and budget is None:
            budget = LONGEST_WAIT_FOR_LOAD
        if leader:
            rules.count("loads")
            task = asyncio.ensure_future(self._load(key, loader, flight))
            self._loads.add(task)
            task.add_done_callback(self._landed)
            flight.future = task
        elif entry is not None:
            rules.count("served_stale")
            return entry
        else:
            rules.count("waited_for_load")
        assert flight.future is not None
        try:
            value = await asyncio.wait_for(asyncio.shield(flight.future), budget)
        except TimeoutError:
            if entry is not None:  # the load goes on and fills the cache when it ends
                rules.count("served_stale")
                return entry
            raise _waited_too_long(budget or 0.0, start) from None
        except Exception as exc:
            if not leader:
                raise
            return rules.fallback(exc, entry)
        return Served(value, False, time.monotonic() - start if not leader else 0.0)

    def _landed(self, task: asyncio.Task[Any]) -> None:
        self._loads.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a load nobody waits for any more must not warn

    async def _load(self, key: str, loader: Callable[[], Awaitable[Any]],
                    flight: _Flight) -> Any:
        try:
            value = await loader()
            await self._store(key, self._rules.encode(key, value))
            return value
        finally:
            self._rules.land(key, flight)

    async def _read(self, key: str) -> Served[Any] | None:
        try:
            found = await self.backend.aget(key)
        except CacheUnavailable as exc:
            found = self._rules.read_locally(exc, key)
        except ValueError as exc:  # RedisBackend: a value in no entry's shape (see foreign)
            self._rules.foreign(key, exc)
            found = None
        return self._rules.entry(found, key)

    async def _store(self, key: str, payload: Any) -> None:
        try:
            await self.backend.aset(key, payload, self._rules.stale_for)
        except CacheUnavailable as exc:
            self._rules.store_locally(exc, key, payload)

    async def invalidate(self, key: str) -> None:
        if self._rules.local is not None:
            self._rules.local.delete(key)
        try:
            await self.backend.adelete(key)
        except CacheUnavailable as exc:
            self._rules.backend_failed(exc, f"deleting {key!r}")

    def cached(self, key: str | Callable[..., str] | None = None, *, deadline: Duration = None,
               ) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Awaitable[T]]]:
        """Decorate an async loader function; see :meth:`StaleCache.cached`."""
        def decorate(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
            @functools.wraps(fn)
            async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
                name = self._rules.key_for(fn, key, args, kwargs)
                return await self.get_or_load(name, lambda: fn(*args, **kwargs),
                                              deadline=deadline)
            return wrapper
        return decorate
