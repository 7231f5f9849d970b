"""The event loop: a heap of (time, sequence, callback, argument), run in time order.

Chosen over SimPy after measuring both on the same closed-loop pool model
(``bench/sim_scale.py --engines``): SimPy's generator processes and Event objects cost several
times more per event than a plain callback on a heap, and the scale goal (10,000 clients over
8 poolers, 60 simulated seconds) is counted in millions of events. The sequence number breaks
ties in the order events were scheduled, so a run is the same, byte for byte, every time.

Cancelling an event is left to its owner: each callback checks whether it is still current
(a query generation, a connection's state), which is cheaper than removing it from the heap.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

Callback = Callable[[Any], None]


class Engine:
    """Simulated time in seconds from the start of a run."""

    __slots__ = ("_heap", "_sequence", "events", "now")

    def __init__(self) -> None:
        self.now = 0.0
        self.events = 0
        self._heap: list[tuple[float, int, Callback, Any]] = []
        self._sequence = itertools.count()

    def at(self, when: float, callback: Callback, argument: Any = None) -> None:
        """Call ``callback(argument)`` at ``when`` (never before now)."""
        heapq.heappush(self._heap, (max(when, self.now), next(self._sequence), callback,
                                    argument))

    def run(self, until: float) -> None:
        """Run every event up to ``until`` (inclusive); later ones stay unrun."""
        heap = self._heap
        pop = heapq.heappop
        count = 0
        while heap and heap[0][0] <= until:
            when, _, callback, argument = pop(heap)
            self.now = when
            callback(argument)
            count += 1
        self.events += count
        self.now = until
