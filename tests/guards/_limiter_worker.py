"""A process for test_limits: threads that hold one key's slots and measure, in Redis, how
many holders are inside at once. The Redis URL comes in the environment (never in argv)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import redis

from pgsteady.errors import LimitExceeded
from pgsteady.guards import KeyedLimiter, RedisBackend


def crowd(url: str, threads: int, seconds: float) -> None:
    """Print {"max_inside": ..., "holds": ..., "refused": ...} after ``seconds`` of holding."""
    limiter = KeyedLimiter(2, backend=RedisBackend(url, timeout=2), lease=5)
    probe = redis.Redis.from_url(url, socket_timeout=2)
    lock = threading.Lock()
    seen = {"max_inside": 0, "holds": 0, "refused": 0}
    end = time.monotonic() + seconds

    def run() -> None:
        while time.monotonic() < end:
            try:
                with limiter.hold("org:42", wait=0.5):
                    inside = probe.incr("inside:org:42")
                    time.sleep(0.002)
                    probe.decr("inside:org:42")
                with lock:
                    seen["holds"] += 1
                    seen["max_inside"] = max(seen["max_inside"], inside)
            except LimitExceeded:
                with lock:
                    seen["refused"] += 1

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(seconds + 10)
    print(json.dumps(seen), flush=True)


def hold_forever(url: str, lease: float) -> None:
    """Take the key's only slot, say so, and hold it until killed."""
    limiter = KeyedLimiter(1, backend=RedisBackend(url, timeout=2), lease=lease)
    with limiter.hold("org:7", wait=5):
        print("held", flush=True)
        time.sleep(60)


if __name__ == "__main__":
    url = os.environ["PGSTEADY_TEST_REDIS_URL"]
    if sys.argv[1] == "crowd":
        crowd(url, int(sys.argv[2]), float(sys.argv[3]))
    else:
        hold_forever(url, float(sys.argv[2]))
