"""Per-second counts of one run, the same ones the lab measures."""

from __future__ import annotations

COUNTERS = ("answered", "timeouts", "rejected", "errors", "db_completions",
            "server_connections_opened", "not_ready_closures", "dropped_cancels")


class Tally:
    """One list per counter, indexed by ``int(now)``: whole seconds since the run began (the
    run stops at its duration, so the last slot, never reported, takes what happens then)."""

    __slots__ = (*COUNTERS, "seconds")

    answered: list[int]
    timeouts: list[int]
    rejected: list[int]
    errors: list[int]
    db_completions: list[int]
    server_connections_opened: list[int]
    not_ready_closures: list[int]
    dropped_cancels: list[int]

    def __init__(self, duration: float) -> None:
        self.seconds = max(1, round(duration))
        for name in COUNTERS:
            setattr(self, name, [0] * (self.seconds + 2))
