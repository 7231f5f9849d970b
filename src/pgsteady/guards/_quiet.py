"""Warnings that repeat during an outage, logged once per quiet period with a count."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

QUIET_FOR = 10.0
"""Repeated warnings of one kind (Redis down, serving stale) are logged once per this many
seconds, with how many were left out: an outage must not become a log flood."""


class QuietLog:
    """One record per kind per :data:`QUIET_FOR` seconds on ``log``; the next one says how
    many were left out."""

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        self._lock = threading.Lock()
        self._quiet: dict[str, tuple[float, int]] = {}  # kind -> (quiet until, left out)

    def note(self, kind: str, level: int, message: str, *args: Any) -> None:
        now = time.monotonic()
        with self._lock:
            until, left_out = self._quiet.get(kind, (0.0, 0))
            if now < until:
                self._quiet[kind] = (until, left_out + 1)
                return
            self._quiet[kind] = (now + QUIET_FOR, 0)
        if left_out:
            message += f" ({left_out} more like it in the last {QUIET_FOR:.0f} s not logged)"
        self.log.log(level, message, *args)
