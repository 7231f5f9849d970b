"""A TCP fault proxy for the PgBouncer -> PostgreSQL hop, controllable while it runs.

It sits where the network is in production and injects the faults the seeds describe: a cost
on every new server connection (the 50 ms that makes PgBouncer's one-at-a-time refill slow),
a stall of all traffic, a black hole, and a reset of every connection. It also classifies
each connection's first packet (startup, SSLRequest, CancelRequest), which tells pool refills
apart from the short connections PgBouncer opens to forward a cancel.

Hand-written because nothing installable does this: Toxiproxy is a Go binary we cannot
install here and its Python client is unmaintained; psycopg's own test proxy (``fix_proxy``)
only starts and stops. It runs its own asyncio loop in a daemon thread, so synchronous code,
tests and the lab can change faults from any thread via the public methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Self

from pgsteady.errors import LabError

log = logging.getLogger("pgsteady.lab.proxy")

_SSL_REQUEST = 80877103
_CANCEL_REQUEST = 80877102
_GSSENC_REQUEST = 80877104
_PROTOCOL_3 = 196608
_CHUNK = 65536
_UPSTREAM_CONNECT_TIMEOUT = 10.0
_EVENT_LOG_LIMIT = 200_000  # new-connection timestamps kept for per-second charts


def classify(first_bytes: bytes) -> str:
    """Name a PostgreSQL client's first packet: startup, ssl_request, cancel_request, ..."""
    if len(first_bytes) < 8:
        return "other"
    _length, code = struct.unpack("!ii", first_bytes[:8])
    return {
        _SSL_REQUEST: "ssl_request",
        _CANCEL_REQUEST: "cancel_request",
        _GSSENC_REQUEST: "gssenc_request",
        _PROTOCOL_3: "startup",
    }.get(code, "other")


@dataclass
class ProxyStats:
    """Counters since the proxy started."""

    connections: int = 0
    active: int = 0
    first_packet: Counter[str] = field(default_factory=Counter)
    blackholed: int = 0
    resets: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


@dataclass(eq=False)
class _Link:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None


class FaultProxy:
    """Relay 127.0.0.1:``port`` to ``upstream``, with faults switchable at run time.

    Use as a context manager, or ``start()`` / ``stop()``. All methods are thread-safe.
    """

    def __init__(
        self, upstream_port: int, *, upstream_host: str = "127.0.0.1", port: int = 0,
        connect_delay: float = 0.0,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._requested_port = port
        self.port = 0
        self.connect_delay = connect_delay
        self._stats = ProxyStats()
        self._events: deque[tuple[float, str]] = deque(maxlen=_EVENT_LOG_LIMIT)
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stall_until = 0.0
        self._blackholed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flowing: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._stop: asyncio.Event | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="pgsteady-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10.0):
            raise LabError("the fault proxy did not start within 10 s")
        if self._startup_error is not None:
            raise LabError(f"the fault proxy cannot listen on 127.0.0.1:{self._requested_port}: "
                           f"{self._startup_error}; choose another port") from None
        return self

    def stop(self) -> None:
        loop, stop_event = self._loop, self._stop
        if loop is not None and stop_event is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop_event.set)
        if self._thread is not None:
            self._thread.join(10.0)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults ------------------------------------------------------------------------------

    def set_connect_delay(self, seconds: float) -> None:
        """Hold each NEW upstream connection this long before connecting it."""
        self.connect_delay = max(0.0, seconds)

    def stall(self, seconds: float) -> None:
        """Hold all traffic, both ways and on every connection, for ``seconds`` from now."""
        self._call(self._stall, seconds)

    def blackhole(self, on: bool = True) -> None:
        """While on: accept new connections but never relay them; freeze existing ones."""
        self._call(self._set_blackhole, on)

    def reset(self) -> None:
        """Abort every connection now (both sides see a reset)."""
        self._call(self._reset)

    def stats(self) -> ProxyStats:
        """A snapshot of the counters."""
        s = self._stats
        return ProxyStats(s.connections, len(self._links), Counter(s.first_packet), s.blackholed,
                          s.resets, s.bytes_up, s.bytes_down)

    def events(self) -> list[tuple[float, str]]:
        """``(time.monotonic(), first packet kind)`` of each new connection, oldest first."""
        return list(self._events)

    # -- inside the loop ---------------------------------------------------------------------

    def _call(self, fn: object, *args: object) -> None:
        if self._loop is None:
            raise LabError("the fault proxy is not running; call start() first")
        self._loop.call_soon_threadsafe(fn, *args)  # type: ignore[arg-type]

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._stop = asyncio.Event()
        try:
            server = await asyncio.start_server(self._handle, "127.0.0.1", self._requested_port)
        except OSError as exc:
            self._startup_error = exc
            self._ready.set()
            return
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            self._reset(count=False)
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _stall(self, seconds: float) -> None:
        assert self._loop is not None
        self._stall_until = max(self._stall_until, time.monotonic() + seconds)
        self._update_gate()
        self._loop.call_later(seconds, self._update_gate)

    def _set_blackhole(self, on: bool) -> None:
        self._blackholed = on
        self._update_gate()

    def _update_gate(self) -> None:
        assert self._flowing is not None
        if self._blackholed or time.monotonic() < self._stall_until:
            self._flowing.clear()
        else:
            self._flowing.set()

    def _reset(self, count: bool = True) -> None:
        if count:
            self._stats.resets += 1
        for link in list(self._links):
            link.client.transport.abort()
            if link.upstream is not None:
                link.upstream.transport.abort()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(client=writer)
        self._links.add(link)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._stats.connections += 1
        try:
            if self._blackholed:
                self._stats.blackholed += 1
                self._events.append((time.monotonic(), "blackholed"))
                while await reader.read(_CHUNK):  # swallow until the client hangs up
                    pass
                return
            first = await reader.read(_CHUNK)
            if not first:
                return
            kind = classify(first)
            self._stats.first_packet[kind] += 1
            self._events.append((time.monotonic(), kind))
            if self.connect_delay > 0:
                await asyncio.sleep(self.connect_delay)
            assert self._flowing is not None
            await self._flowing.wait()
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(*self.upstream), _UPSTREAM_CONNECT_TIMEOUT)
            link.upstream = up_writer
            up_writer.write(first)
            self._stats.bytes_up += len(first)
            pipes = [asyncio.ensure_future(self._pipe(reader, up_writer, up=True)),
                     asyncio.ensure_future(self._pipe(up_reader, writer, up=False))]
            _done, pending = await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            log.debug("proxy connection ended: %s", exc)
        finally:
            self._links.discard(link)
            for side in (link.client, link.upstream):
                if side is not None:
                    side.close()

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, up: bool
    ) -> None:
        assert self._flowing is not None
        while data := await src.read(_CHUNK):
            if not self._flowing.is_set():
                await self._flowing.wait()
            dst.write(data)
            if up:
                self._stats.bytes_up += len(data)
            else:
                self._stats.bytes_down += len(data)
            await dst.drain()
