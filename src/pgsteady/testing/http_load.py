"""Bounded HTTP load on 127.0.0.1 for tests and bench scripts: many connections from one
thread (``selectors``), so the client adds no threads to the count a test measures.

- :func:`burst`: ``n`` requests sent at once, each read to its end; every connection is
  closed by ``within`` seconds, answered or not.
- :func:`half_sent`: ``n`` connections that send part of a request and stop (slowloris).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import time
from dataclasses import dataclass

HOST = "127.0.0.1"  # load is only ever sent to loopback


@dataclass(frozen=True)
class Answer:
    """One request of a burst: the status (0: none), its body, and how long it took."""

    status: int
    body: bytes
    seconds: float
    error: str = ""  # "reset", "refused", "timeout" when there was no status

    @property
    def answered(self) -> bool:
        return self.status != 0


def _request(path: str) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n"
            f"User-Agent: pgsteady-http-load\r\n\r\n").encode()


def burst(port: int, n: int, path: str = "/metrics", within: float = 30.0) -> list[Answer]:
    """Open ``n`` connections to ``127.0.0.1:port`` at once, send ``GET path`` on each and
    read every answer; whatever has not finished after ``within`` seconds is closed as
    ``timeout``."""
    if not 0 < n <= 5000:
        raise ValueError("n must be from 1 to 5000")
    sel = selectors.DefaultSelector()
    start = time.monotonic()
    data = _request(path)
    pending: dict[socket.socket, bytearray] = {}
    done: list[Answer] = []

    def finish(sock: socket.socket, error: str = "") -> None:
        raw = bytes(pending.pop(sock))
        sel.unregister(sock)
        sock.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        parts = head.split(b" ", 2)
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        done.append(Answer(status, body, time.monotonic() - start,
                           "" if status else (error or "closed")))

    for _ in range(n):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.connect((HOST, port))
        pending[sock] = bytearray()
        sel.register(sock, selectors.EVENT_WRITE, sock)
    try:
        while pending and time.monotonic() - start < within:
            for key, events in sel.select(timeout=0.1):
                sock = key.data
                if events & selectors.EVENT_WRITE:
                    try:
                        sock.send(data)  # small: fits the socket buffer at once
                    except OSError as exc:
                        finish(sock, "refused" if isinstance(exc, ConnectionRefusedError)
                               else "reset")
                        continue
                    sel.modify(sock, selectors.EVENT_READ, sock)
                    continue
                try:
                    chunk = sock.recv(65536)
                except OSError:
                    finish(sock, "reset")
                    continue
                if chunk:
                    pending[sock] += chunk
                else:
                    finish(sock)
    finally:
        for sock in list(pending):
            finish(sock, "timeout")
        sel.close()
    return done


def half_sent(port: int, n: int, path: str = "/metrics") -> list[socket.socket]:
    """``n`` connections that each sent a request line and one header, never the blank line
    that ends the headers. The caller closes them."""
    if not 0 < n <= 5000:
        raise ValueError("n must be from 1 to 5000")
    socks = []
    try:
        for _ in range(n):
            sock = socket.create_connection((HOST, port), timeout=10)
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n".encode())
            socks.append(sock)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` (0..1) percentile by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))]
