"""Keep psycopg_pool's warnings from flooding the log while PostgreSQL is away.

During a PostgreSQL restart every pool connection attempt and every broken connection logs a
warning on ``psycopg.pool`` ("error connecting in 'pool-1': ...", "discarding closed
connection: ..."): 2,721 lines in 2 s in issue 31, burying the one line that mattered.
:class:`RepeatFilter` lets through the first record of each kind (its format string), then
one per ``every`` seconds carrying how many were left out. ``Database`` and
``AsyncDatabase`` install one on that logger; it is shared by every pool of the process.
"""

from __future__ import annotations

import logging
import threading
import time

POOL_LOGGER = "psycopg.pool"
REPEAT_EVERY = 10.0
"""Seconds between two records of one kind on the pool's logger."""


class RepeatFilter(logging.Filter):
    """The first record of each message kind, then one per ``every`` seconds, which says
    how many like it were dropped since the last one."""

    def __init__(self, every: float = REPEAT_EVERY) -> None:
        super().__init__()
        self.every = every
        self._lock = threading.Lock()
        self._kinds: dict[str, tuple[float, int]] = {}  # msg -> (quiet until, dropped)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        kind = str(record.msg)
        now = time.monotonic()
        with self._lock:
            until, dropped = self._kinds.get(kind, (0.0, 0))
            if now < until:
                self._kinds[kind] = (until, dropped + 1)
                return False
            self._kinds[kind] = (now + self.every, 0)
        if dropped:  # the added text has no "%": the record's args still format as before
            record.msg = f"{kind} ({dropped} more like it in the last {self.every:g} s " \
                         f"not logged)"
        return True


_install_lock = threading.Lock()


def install() -> None:
    """Put one :class:`RepeatFilter` on psycopg_pool's logger (once per process)."""
    logger = logging.getLogger(POOL_LOGGER)
    with _install_lock:
        if not any(isinstance(f, RepeatFilter) for f in logger.filters):
            logger.addFilter(RepeatFilter())
