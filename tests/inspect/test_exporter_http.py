"""The bounded HTTP server behind ``/metrics`` and ``health.serve()`` under clients that do
not read, oversized request heads and bare-LF requests, with real sockets; and pipelined
scrapes sharing one PostgreSQL snapshot (issue 42, item 10)."""

from __future__ import annotations

import contextlib
import socket
import time

import pytest

from pgsteady import _http
from pgsteady.inspect import postgres
from pgsteady.inspect.exporter import SHARE_FOR, Exporter, serve

BIG = b"m" * 65536  # a /metrics answer of a busy server is tens of KB


def app(request: _http.Request) -> _http.Response:
    """/big: a large answer; anything else: a tiny one (a liveness probe)."""
    if request.path == "/big":
        return _http.Response(200, [("Content-Type", "text/plain")], BIG)
    return _http.text(200, "live\n")


def get(port: int, path: str = "/live", timeout: float = 30.0) -> tuple[bytes, float]:
    """One GET, read to the end: (the raw answer, seconds it took)."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return _read_all(sock), time.monotonic() - start


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


def non_reader(port: int, requests: int = 200) -> socket.socket:
    """A client that pipelines ``requests`` GET /big and never reads an answer (a small
    receive buffer, so the server's writes stall soon)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n" * requests)
    return sock


def test_clients_that_never_read_hold_no_worker():
    """Eight clients (twice the workers) pipeline requests and never read: a liveness probe
    and a scrape are still answered at once, the server keeps its five threads, and the
    silent clients are dropped at the write deadline."""
    limits = _http.Limits(write_timeout=2.0)
    with _http.BoundedServer(app, limits=limits).start() as server:
        stalled = [non_reader(server.port) for _ in range(8)]
        try:
            time.sleep(0.5)  # every worker has had time to get stuck, if it could
            live, live_took = get(server.port)
            big, big_took = get(server.port, "/big")
            threads = server.threads
            time.sleep(limits.write_timeout + 1.5)  # past the write deadline
            ended = []
            for sock in stalled:
                sock.settimeout(10)
                received = _read_all(sock)  # what the kernel held, then the close
                ended.append(received.count(b"HTTP/1.1 200") < 200)
        finally:
            for sock in stalled:
                sock.close()
    assert live.startswith(b"HTTP/1.1 200") and live.endswith(b"live\n")
    assert big.endswith(BIG)
    assert live_took < 1.0 and big_took < 1.0  # the old server: about write_timeout (2 s)
    assert threads == 1 + limits.workers
    assert all(ended)


def test_a_complete_request_head_over_the_cap_is_refused():
    """A head that arrives complete in one piece but is over max_header_bytes gets 431, as
    one arriving piece by piece does; one under the cap is answered."""
    limits = _http.Limits(max_header_bytes=4096)
    with _http.BoundedServer(app, limits=limits).start() as server:
        for size, status in ((3000, b"200"), (6000, b"431"), (40000, b"431")):
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                sock.sendall(b"GET /live HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * size
                             + b"\r\nConnection: close\r\n\r\n")
                answer = _read_all(sock)
            assert answer.split(b" ")[1] == status, (size, answer[:80])


@pytest.mark.parametrize("head", [
    b"GET /live HTTP/1.1\nHost: x\n\n",
    b"GET /live HTTP/1.1\r\nHost: x\n\n",
    b"GET /live HTTP/1.1\nHost: x\r\n\r\n",
], ids=["bare-lf", "mixed-1", "mixed-2"])
def test_a_request_with_bare_lf_line_ends_is_answered(head):
    """Request heads whose lines end in a bare LF (or a mix) are read as common servers read
    them, pipelined ones too, headers included."""
    with _http.BoundedServer(app).start() as server, \
            socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head + head.replace(b"Host: x", b"Host: x\nConnection: close"))
        answer = _read_all(sock)
    assert answer.count(b"HTTP/1.1 200") == 2, answer
    assert answer.count(b"live\n") == 2
    assert answer.rstrip().endswith(b"live")


def test_pipelined_scrapes_share_one_snapshot(pgsteady_database, monkeypatch):
    """Ten /metrics requests pipelined on one connection are answered from one PostgreSQL
    snapshot (shared within SHARE_FOR seconds), not ten; a scrape after that window reads a
    fresh one."""
    taken: list[float] = []
    original = postgres.take_snapshot

    def counting(*args: object, **kwargs: object) -> postgres.PostgresSnapshot:
        taken.append(time.monotonic())
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(postgres, "take_snapshot", counting)
    exporter = Exporter(pgsteady_database.dsn, timeout=10.0)
    try:
        with serve(exporter) as server:
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 9
                             + b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                answers = _read_all(sock)
            pipelined = len(taken)
            time.sleep(SHARE_FOR + 0.2)
            later, _ = get(server.port, "/metrics")
    finally:
        exporter.close()
    assert answers.count(b"HTTP/1.1 200") == 10
    assert answers.count(b'pgsteady_up{source="postgres"} 1.0') == 10
    assert pipelined <= 2  # one, or two if the first took longer than the window
    assert b'pgsteady_up{source="postgres"} 1.0' in later
    assert len(taken) == pipelined + 1

