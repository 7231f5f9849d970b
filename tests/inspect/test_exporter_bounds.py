"""The exporter's HTTP server under abuse: half-sent requests, silent connections and a
burst of 1,000 scrapes, against a real PostgreSQL (issue 27, item 3)."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections import Counter

import pytest

from pgsteady._http import Limits
from pgsteady.inspect.exporter import Exporter, serve
from pgsteady.testing.http_load import burst, half_sent

UP = b'pgsteady_up{source="postgres"} 1.0'


@pytest.fixture
def exporter(pgsteady_database):
    exporter = Exporter(pgsteady_database.dsn, timeout=5.0)
    yield exporter
    exporter.close()


def _scrape(port: int) -> tuple[bytes, float]:
    start = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
        body = answer.read()
    return body, time.monotonic() - start


def test_half_sent_requests_keep_threads_bounded(exporter):
    """300 connections stuck mid-headers (more than the 256 allowed) add no thread (the server
    keeps its I/O thread and 4 workers), and a real scrape still answers within 5 s."""
    limits = Limits(header_timeout=60.0)
    with serve(exporter, limits=limits) as server:
        _scrape(server.port)  # a first scrape: connections and caches warm
        before = threading.active_count()
        socks = half_sent(server.port, 300)
        try:
            time.sleep(1.5)  # read by the server, and stalled long enough to be evicted
            threads = threading.active_count()
            body, took = _scrape(server.port)
        finally:
            for sock in socks:
                sock.close()
        assert server.threads == 5
    assert threads <= before + 1  # + at most one source read of a scrape still finishing
    assert UP in body
    assert took < 5.0


def test_silent_and_idle_connections_are_closed(exporter):
    """A connection that sends nothing is closed after header_timeout, and a keep-alive one
    after idle_timeout once answered; neither is kept for ever."""
    limits = Limits(header_timeout=0.5, idle_timeout=0.5)
    with serve(exporter, limits=limits) as server:
        silent = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        try:
            start = time.monotonic()
            assert silent.recv(1024) == b""  # closed by the server, nothing sent
            silent_closed = time.monotonic() - start
        finally:
            silent.close()
        kept = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        try:
            kept.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            while UP not in answer:
                chunk = kept.recv(65536)
                assert chunk, "closed before answering"
                answer += chunk
            assert b"Connection: keep-alive" in answer
            start = time.monotonic()
            while kept.recv(65536):  # the rest of the body, then the close
                pass
            idle_closed = time.monotonic() - start
        finally:
            kept.close()
    assert 0.3 < silent_closed < 5.0
    assert idle_closed < 5.0


def test_a_thousand_concurrent_scrapes_answer_or_refuse_quickly(exporter):
    """1,000 scrapes at once: each gets metrics or a quick 503, all within 20 s (the old
    server left clients waiting 60 s), and the server keeps its 5 threads."""
    with serve(exporter) as server:
        answers = burst(server.port, 1000, within=60.0)
        assert server.threads == 5
    statuses = Counter(a.status for a in answers)
    assert len(answers) == 1000
    assert set(statuses) <= {200, 503}, statuses
    assert statuses[200] >= 4
    assert all(UP in a.body for a in answers if a.status == 200)
    assert max(a.seconds for a in answers) < 20.0
