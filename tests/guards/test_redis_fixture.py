"""The pgsteady_redis fixture's outages: restart after clients, and a hung server."""

from __future__ import annotations

import pytest
import redis


def test_restart_after_clients_keeps_the_port(pgsteady_redis):
    """restart() while a client is connected (the server closes first, leaving its side in
    TIME_WAIT on the port) starts on the same port with the same URL, twice in a row, and
    the data is gone."""
    port = pgsteady_redis.port
    for _ in range(2):
        with pgsteady_redis.client() as client:
            client.set("k", "v")
            pgsteady_redis.restart()
            assert pgsteady_redis.port == port and pgsteady_redis.running
            assert client.get("k") is None  # reconnected to the new, empty server


def test_hung_redis_stops_answering_then_answers(pgsteady_redis):
    """Inside hung() a command times out; after it the same server answers again."""
    with pgsteady_redis.client(socket_timeout=0.2) as client:
        assert client.ping()
        with pgsteady_redis.hung(), pytest.raises(redis.TimeoutError):
            client.ping()
        assert client.ping()
