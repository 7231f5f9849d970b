"""A small HTTP/1.1 server with bounds, for ``/metrics`` and the health probes.

Why hand-written: ``http.server.ThreadingHTTPServer`` (and prometheus-client's
``start_http_server``, which is one) starts a thread per connection and reads headers with no
timeout, so 300 half-sent requests hold 300 threads for ever, and its listen backlog of 5
left 1,000 concurrent scrapes retrying SYNs for up to a minute. Here:

- one I/O thread (``selectors``) accepts, reads request headers and watches idle keep-alive
  connections; a slow or silent client costs a socket and a small buffer, never a thread;
- a fixed pool of ``workers`` threads runs the app on complete requests only, and hands the
  answer's bytes back to the I/O thread, which writes them without blocking as the client
  reads: a client that pipelines requests and never reads its answers costs a connection
  slot until its write deadline, never a worker (four such clients held all four workers in
  ``sendall`` for 10 s each, and scrapes and liveness probes went unanswered);
- every phase has a deadline (:class:`Limits`): headers, idle keep-alive, time queued for a
  worker, writing the answer; past it the connection is closed (or answered 503);
- the whole request head (request line and headers) is at most ``max_header_bytes``, however
  it arrives, and a head whose lines end in a bare LF is read as common servers read it;
- at ``max_connections`` open, the connection stalled longest without a complete request
  is closed to make room (so slow clients cannot lock a scrape out); when none has stalled
  for a second, or ``queue`` requests already wait, a new one gets an immediate
  ``503 Retry-After: 1`` and is closed, instead of waiting minutes.

The app is a plain function ``Request -> Response``; no request bodies are accepted (GET and
HEAD are all ``/metrics`` and ``/health/*`` need). An app whose answer waits on something slow
and shared (the readiness checks) returns a ``concurrent.futures.Future[Response]`` instead: the
worker moves on at once and a worker sends the answer when the future completes, so requests
waiting on it cost a socket each, never a worker (with 4 workers, 50 probes waiting on a 1 s
check used to queue for up to 5 s). Such a future must complete: nothing else ends the wait.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import queue
import re
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesHeaderParser
from functools import partial
from http import HTTPStatus
from typing import Self

log = logging.getLogger("pgsteady.http")

SWEEP_EVERY = 0.1  # seconds between checks for connections past their deadline
LISTEN_BACKLOG = 1024  # the kernel caps it at net.core.somaxconn
EVICT_AFTER = 1.0  # at the connection cap, one waiting this long without a request may go


@dataclass(frozen=True)
class Limits:
    """The server's bounds: threads, connections and the deadline of each phase (seconds)."""

    workers: int = 4  # threads running the app; the server has one more for I/O
    max_connections: int = 256  # open at once; more are answered 503 and closed
    queue: int = 64  # complete requests waiting for a worker; more are answered 503
    header_timeout: float = 5.0  # from accept (or the last answer) to a complete header block
    idle_timeout: float = 15.0  # a keep-alive connection with no new request is closed
    queue_timeout: float = 5.0  # a request that waited longer for a worker is answered 503
    write_timeout: float = 10.0  # sending one answer
    max_header_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        for name in ("workers", "max_connections", "queue", "max_header_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be at least 1")
        for name in ("header_timeout", "idle_timeout", "queue_timeout", "write_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be more than 0 seconds")


@dataclass(frozen=True)
class Request:
    method: str
    target: str  # path and query, as sent
    version: str  # HTTP/1.0 or HTTP/1.1
    headers: Message

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]


@dataclass(frozen=True)
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""


Answer = Response | concurrent.futures.Future[Response]
App = Callable[[Request], Answer]
# A worker's item: a request to answer, or (response set) a deferred answer to send.
_Work = tuple["_Conn", Request, Response | None]


@dataclass(eq=False)
class _Conn:
    sock: socket.socket
    buffer: bytearray = field(default_factory=bytearray)
    deadline: float = 0.0
    waiting: bool = False  # idle keep-alive (True) or within a request's headers (False)
    since: float = field(default_factory=time.monotonic)  # accepted, or last answered
    queued_at: float = 0.0
    outbox: bytes = b""  # an answer being written by the I/O thread
    sent: int = 0  # bytes of ``outbox`` written
    keep: bool = False  # whether to read another request once ``outbox`` is written


def _raw(status: int, headers: list[tuple[str, str]], body: bytes, *, head: bool = False,
         keep_alive: bool = False) -> bytes:
    phrase = HTTPStatus(status).phrase
    lines = [f"HTTP/1.1 {status} {phrase}"]
    lines += [f"{name}: {value}" for name, value in headers
              if name.lower() not in ("content-length", "connection")]
    lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: " + ("keep-alive" if keep_alive else "close"))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else body)


def _refusal(status: int, text: str) -> bytes:
    return _raw(status, [("Content-Type", "text/plain; charset=utf-8"), ("Retry-After", "1")],
                text.encode() + b"\n")


class BoundedServer:
    """Serve ``app`` on ``host:port`` within ``limits`` (see the module doc).

    ``start()`` starts the I/O thread and the workers; ``stop()`` closes everything."""

    def __init__(self, app: App, host: str = "127.0.0.1", port: int = 0,
                 limits: Limits | None = None, *, name: str = "pgsteady-http") -> None:
        self.app = app
        self.limits = limits or Limits()
        self.name = name
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((host, port))
            self._listener.listen(LISTEN_BACKLOG)
        except OSError:
            self._listener.close()
            raise
        self._listener.setblocking(False)
        self.server_address: tuple[str, int] = self._listener.getsockname()[:2]
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._returned: queue.SimpleQueue[_Conn] = queue.SimpleQueue()  # from workers
        # Unbounded so that a deferred answer can always be handed to a worker; requests are
        # bounded by the count below (limits.queue), answers by the open connections.
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._queued = 0  # requests in _work
        self._queued_lock = threading.Lock()
        self._open: set[_Conn] = set()  # every connection not yet closed, wherever it is
        self._open_lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads = [threading.Thread(target=self._io_loop, name=f"{name}-io", daemon=True)]
        self._threads += [threading.Thread(target=self._worker, name=f"{name}-worker-{i}",
                                           daemon=True) for i in range(self.limits.workers)]

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def threads(self) -> int:
        """Threads this server runs: the I/O thread and the workers, whatever the load."""
        return sum(t.is_alive() for t in self._threads)

    def start(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, wait: float = 5.0) -> None:
        """Stop accepting, close every connection, and wait up to ``wait`` s for the threads
        (a worker inside a slow app call finishes it on its daemon thread)."""
        self._stopping.set()
        self._wake()
        for _ in range(self.limits.workers):
            self._work.put(None)
        deadline = time.monotonic() + wait
        for thread in self._threads:
            if thread.ident is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        with self._open_lock:
            leftover, self._open = self._open, set()
        for conn in leftover:
            conn.sock.close()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the I/O thread ------------------------------------------------------------------

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # already woken (buffer full) or closed
            self._wake_w.send(b"x")

    def _io_loop(self) -> None:
        sel = self._selector
        sel.register(self._listener, selectors.EVENT_READ, "accept")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        next_sweep = time.monotonic() + SWEEP_EVERY
        try:
            while not self._stopping.is_set():
                for key, _ in sel.select(timeout=max(0.0, next_sweep - time.monotonic())):
                    if key.data == "accept":
                        self._accept()
                    elif key.data == "wake":
                        self._drain_wake()
                    elif key.data.outbox:
                        self._write(key.data)
                    else:
                        self._read(key.data)
                now = time.monotonic()
                if now >= next_sweep:
                    self._sweep(now)
                    next_sweep = now + SWEEP_EVERY
        except Exception:
            log.exception("%s: the I/O thread failed; no more connections are served",
                          self.name)
        finally:
            sel.close()

    def _accept(self) -> None:
        for _ in range(LISTEN_BACKLOG):  # bounded: other connections get their turn
            try:
                sock, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. out of file descriptors: keep serving the others
                log.warning("%s: accept failed: %s", self.name, exc)
                return
            with self._open_lock:
                full = len(self._open) >= self.limits.max_connections
            if full and not self._evict_stalest():
                self._refuse(sock, "too many connections")
                continue
            sock.setblocking(False)
            conn = _Conn(sock, deadline=time.monotonic() + self.limits.header_timeout)
            with self._open_lock:
                self._open.add(conn)
            self._selector.register(sock, selectors.EVENT_READ, conn)

    def _evict_stalest(self) -> bool:
        """At the cap, close the connection that has waited longest without a complete request
        (half-sent or idle), if it has waited ``EVICT_AFTER`` s: slow clients holding every
        slot must not lock out a scrape. Fresh ones (a burst's) are never evicted."""
        waiting = [key.data for key in self._selector.get_map().values()
                   if isinstance(key.data, _Conn)]
        if not waiting:
            return False
        stalest = min(waiting, key=lambda conn: conn.since)
        if time.monotonic() - stalest.since < EVICT_AFTER:
            return False
        log.debug("%s: at %d connections, closing the one waiting longest", self.name,
                  self.limits.max_connections)
        self._close(stalest)
        return True

    def _refuse(self, sock: socket.socket, why: str) -> None:
        """Answer 503 without waiting for the client (what fits the socket buffer), close.
        What the client already sent is read first: closing over unread bytes would send a
        reset that can discard the answer before the client reads it."""
        with contextlib.suppress(OSError):
            sock.setblocking(False)
            sock.recv(65536)
        with contextlib.suppress(OSError):
            sock.send(_refusal(503, f"busy: {why}; retry"))
        sock.close()

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        while True:
            try:
                conn = self._returned.get_nowait()
            except queue.Empty:
                return
            if self._stopping.is_set():
                self._forget(conn)
                conn.sock.close()
                continue
            conn.deadline = time.monotonic() + self.limits.write_timeout
            if self._send_some(conn):
                self._written(conn)
            elif conn.outbox:  # the client's buffers are full: write as it reads
                self._selector.register(conn.sock, selectors.EVENT_WRITE, conn)

    def _send_some(self, conn: _Conn) -> bool:
        """Write what the socket takes now, without blocking; True once all is written. A
        client gone is closed (False, with ``outbox`` emptied)."""
        view = memoryview(conn.outbox)
        try:
            while conn.sent < len(view):
                conn.sent += conn.sock.send(view[conn.sent:])
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            log.debug("%s: sending to a client failed: %s", self.name, exc)
            conn.outbox = b""
            self._forget(conn)
            conn.sock.close()
            return False
        return True

    def _write(self, conn: _Conn) -> None:
        """The socket can take more of the answer being written."""
        self._selector.unregister(conn.sock)
        if self._send_some(conn):
            self._written(conn)
        elif conn.outbox:
            self._selector.register(conn.sock, selectors.EVENT_WRITE, conn)

    def _written(self, conn: _Conn) -> None:
        """An answer is out: read the next request (a pipelined one may be read already), or
        close."""
        conn.outbox, conn.sent = b"", 0
        if not conn.keep:
            self._forget(conn)
            conn.sock.close()
            return
        conn.waiting = True
        conn.since = time.monotonic()
        conn.deadline = conn.since + self.limits.idle_timeout
        self._selector.register(conn.sock, selectors.EVENT_READ, conn)
        if conn.buffer:
            self._parse(conn)

    def _read(self, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close(conn)
            return
        if conn.waiting:  # the first byte of a new request: its headers' clock starts now
            conn.waiting = False
            conn.deadline = time.monotonic() + self.limits.header_timeout
        conn.buffer += chunk
        self._parse(conn)

    def _parse(self, conn: _Conn) -> None:
        found = _HEAD_END.search(conn.buffer, 0, self.limits.max_header_bytes + 4)
        if found is None:
            if len(conn.buffer) > self.limits.max_header_bytes:
                self._answer_and_close(conn, 431, "request headers too large")
            return
        if found.start() > self.limits.max_header_bytes:  # complete, but too large
            self._answer_and_close(conn, 431, "request headers too large")
            return
        head, rest = bytes(conn.buffer[:found.start()]), conn.buffer[found.end():]
        request = _request(head)
        if request is None:
            self._answer_and_close(conn, 400, "bad request")
            return
        length = request.headers.get("Content-Length", "0").strip()
        if request.headers.get("Transfer-Encoding") or length not in ("", "0"):
            self._answer_and_close(conn, 413, "no request body is accepted here")
            return
        conn.buffer = rest
        self._selector.unregister(conn.sock)
        conn.queued_at = time.monotonic()
        with self._queued_lock:
            full = self._queued >= self.limits.queue
            if not full:
                self._queued += 1
        if full:
            self._forget(conn)
            self._refuse(conn.sock, "too many requests queued")
            return
        self._work.put((conn, request, None))

    def _answer_and_close(self, conn: _Conn, status: int, text: str) -> None:
        self._selector.unregister(conn.sock)
        self._forget(conn)
        with contextlib.suppress(OSError):
            conn.sock.send(_refusal(status, text))
        conn.sock.close()

    def _sweep(self, now: float) -> None:
        """Close the connections in the selector past their header, idle or write deadline."""
        expired = [key.data for key in self._selector.get_map().values()
                   if isinstance(key.data, _Conn) and key.data.deadline <= now]
        for conn in expired:
            log.debug("%s: closing a connection %s", self.name,
                      "that does not read its answer" if conn.outbox else
                      "idle too long" if conn.waiting else "that sent no complete request")
            conn.outbox = b""
            self._close(conn)

    def _close(self, conn: _Conn) -> None:
        self._selector.unregister(conn.sock)
        self._forget(conn)
        conn.sock.close()

    def _forget(self, conn: _Conn) -> None:
        with self._open_lock:
            self._open.discard(conn)

    # -- workers -------------------------------------------------------------------------

    def _worker(self) -> None:
        while not self._stopping.is_set():
            item = self._work.get()
            if item is None:
                return
            conn, request, response = item
            if response is None:
                with self._queued_lock:
                    self._queued -= 1
            try:
                answer = self._serve(conn, request, response)
            except Exception:
                log.exception("%s: answering %s %s failed", self.name, request.method,
                              request.path)
                answer = (_raw(500, _internal_error().headers, _internal_error().body), False)
            if answer is None:
                continue  # deferred: _deferred hands the answer back to a worker
            # The I/O thread writes it, as fast as the client reads: never this worker.
            conn.outbox, conn.keep = answer
            conn.sent = 0
            self._returned.put(conn)
            self._wake()

    def _serve(self, conn: _Conn, request: Request, response: Response | None,
               ) -> tuple[bytes, bool] | None:
        """The bytes answering one request (or its deferred ``response``) and whether to keep
        the connection for another; None when the app deferred its answer."""
        if response is None:
            if time.monotonic() - conn.queued_at > self.limits.queue_timeout:
                return _refusal(503, "busy: waited too long for a worker; retry"), False
            try:
                answer = self.app(request)
            except Exception:
                log.exception("%s: %s %s failed", self.name, request.method, request.path)
                answer = _internal_error()
            if isinstance(answer, concurrent.futures.Future):
                if not answer.done():
                    answer.add_done_callback(partial(self._deferred, conn, request))
                    return None
                answer = self._result(answer, request)
            response = answer
        connection = request.headers.get("Connection", "").lower()
        keep_alive = (request.version == "HTTP/1.1" and "close" not in connection) or \
            (request.version == "HTTP/1.0" and "keep-alive" in connection)
        data = _raw(response.status, response.headers, response.body,
                    head=request.method == "HEAD", keep_alive=keep_alive)
        return data, keep_alive

    def _deferred(self, conn: _Conn, request: Request,
                  answer: concurrent.futures.Future[Response]) -> None:
        """A deferred answer is ready (on the thread that completed it): a worker sends it."""
        self._work.put((conn, request, self._result(answer, request)))

    def _result(self, answer: concurrent.futures.Future[Response], request: Request) -> Response:
        try:
            return answer.result()
        except Exception:  # the app's failure, or a cancelled answer
            log.exception("%s: %s %s failed", self.name, request.method, request.path)
            return _internal_error()


def _internal_error() -> Response:
    return Response(500, [("Content-Type", "text/plain; charset=utf-8")], b"internal error\n")


_HEADERS = BytesHeaderParser()
#: The blank line ending a request head: CRLF CRLF, or with bare LFs (RFC 9112 section 2.2
#: lets a server take a bare LF as a line end; nginx, Apache and Go's server all do).
_HEAD_END = re.compile(rb"\r?\n\r?\n")


def _request(head: bytes) -> Request | None:
    """Parse a request line and its header block; None if it is not HTTP/1.x."""
    line, _, rest = head.replace(b"\r\n", b"\n").partition(b"\n")
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        return None
    try:
        headers = _HEADERS.parsebytes(rest + b"\n\n")
    except Exception:  # the parser is lenient; this is a last guard against a bad header
        return None
    return Request(parts[0].upper(), parts[1], parts[2], headers)


def text(status: int, body: str) -> Response:
    """A plain-text answer."""
    return Response(status, [("Content-Type", "text/plain; charset=utf-8")], body.encode())
