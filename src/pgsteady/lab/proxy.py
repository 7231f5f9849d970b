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
import json
import logging
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Self, TextIO

from pgsteady.errors import LabError
from pgsteady.lab._process import popen

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
        except asyncio.CancelledError:
            pass  # the proxy is stopping; ending quietly keeps asyncio from logging it
        finally:
            self._links.discard(link)
            for side in (link.client, link.upstream):
                if side is not None:
                    side.close()

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, up: bool
    ) -> None:
        assert self._flowing is not None
        try:
            while data := await src.read(_CHUNK):
                if not self._flowing.is_set():
                    await self._flowing.wait()
                dst.write(data)
                if up:
                    self._stats.bytes_up += len(data)
                else:
                    self._stats.bytes_down += len(data)
                await dst.drain()
        except OSError as exc:  # a reset on either side ends this connection, nothing more
            log.debug("proxy pipe ended: %s", exc)


class ProxyProcess:
    """The same proxy in a child process, with the same control methods.

    The lab's load driver saturates a core in the collapse; a proxy sharing its interpreter
    (and GIL) would slow down exactly when the measurement matters, so the lab runs it here.
    Commands travel as JSON lines over the child's stdin/stdout; ``events()`` timestamps are
    ``time.monotonic()``, which is system-wide on Linux, so they line up with ours.
    """

    def __init__(self, upstream_port: int, *, port: int = 0, connect_delay: float = 0.0) -> None:
        self._argv = [sys.executable, "-m", "pgsteady.lab._proxy_main", str(upstream_port),
                      str(port), repr(connect_delay)]
        self.upstream = ("127.0.0.1", upstream_port)
        self.port = 0
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def start(self) -> Self:
        # Its own session: a terminal's Ctrl-C must not reach it (even mid-start-up, before
        # it can ignore SIGINT); we stop it ourselves, and it dies with us.
        self._proc = popen(self._argv, signal.SIGTERM, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True, bufsize=1,
                           start_new_session=True)
        try:
            self.port = int(self._read(30))
        except BaseException:
            self.stop()
            raise
        return self

    def _read(self, timeout: float) -> Any:
        assert self._proc is not None and self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        line = self._proc.stdout.readline() if ready else ""
        if not line:
            raise LabError("the fault proxy process did not answer "
                           f"(exit code {self._proc.poll()})")
        reply = json.loads(line)
        if "error" in reply:
            raise LabError(reply["error"])
        return reply["ok"]

    def _ask(self, command: str, *args: Any) -> Any:
        with self._lock:
            if self._proc is None or self._proc.stdin is None:
                raise LabError("the fault proxy is not running; call start() first")
            self._proc.stdin.write(json.dumps([command, args]) + "\n")
            self._proc.stdin.flush()
            return self._read(30)

    def set_connect_delay(self, seconds: float) -> None:
        self._ask("set_connect_delay", seconds)

    def stall(self, seconds: float) -> None:
        self._ask("stall", seconds)

    def blackhole(self, on: bool = True) -> None:
        self._ask("blackhole", on)

    def reset(self) -> None:
        self._ask("reset")

    def stats(self) -> ProxyStats:
        raw = self._ask("stats")
        return ProxyStats(**{**raw, "first_packet": Counter(raw["first_packet"])})

    def events(self) -> list[tuple[float, str]]:
        return [(at, kind) for at, kind in self._ask("events")]

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.close()  # EOF: the child stops its proxy and exits
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_commands(proxy: FaultProxy, commands: TextIO, replies: TextIO) -> None:
    """The child's loop: one JSON command per line in, one JSON reply per line out."""
    allowed = {"set_connect_delay", "stall", "blackhole", "reset", "stats", "events"}
    for line in commands:
        command, args = json.loads(line)
        if command not in allowed:
            replies.write(json.dumps({"error": f"unknown command {command!r}"}) + "\n")
            replies.flush()
            continue
        try:
            value = getattr(proxy, command)(*args)
            if isinstance(value, ProxyStats):  # asdict() would mangle the Counter
                value = {**vars(value), "first_packet": dict(value.first_packet)}
            reply: dict[str, Any] = {"ok": value}
        except Exception as exc:
            reply = {"error": repr(exc)}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()

