"""The event loop: a heap of (time, sequence, callback, argument), run in time order, plus
FIFO lanes for events that come a fixed delay after they are scheduled.

Chosen over SimPy after measuring both on the same closed-loop pool model
(``bench/sim_scale.py``): SimPy's generator processes and Event objects cost several times
more per event than a plain callback, and the scale goal (10,000 clients over 8 poolers,
60 simulated seconds) is counted in millions of events.

Lanes: most events are a fixed delay away (every deadline, every pause between queries), so
they come due in the order they were scheduled. Each such delay gets a deque, and only its
head sits in the heap; the heap stays as small as the number of running queries, which is
what makes a collapse with tens of thousands of clients cheap. The sequence number breaks
ties in the order events were scheduled, lanes included, so a run is the same, byte for byte,
every time.

Cancelling an event is left to its owner: each callback checks whether it is still current
(a query generation, a connection's state), which is cheaper than removing it.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

Callback = Callable[[Any], None]
Entry = tuple[float, int, Callback, Any]


class Lane:
    """Events ``delay`` seconds after they are scheduled, in FIFO order."""

    __slots__ = ("_engine", "delay", "entries")

    def __init__(self, engine: Engine, delay: float) -> None:
        self._engine = engine
        self.delay = delay
        self.entries: deque[Entry] = deque()

    def after(self, callback: Callback, argument: Any = None) -> None:
        """Call ``callback(argument)`` ``delay`` seconds from now."""
        engine = self._engine
        entry = (engine.now + self.delay, next(engine.sequence), callback, argument)
        entries = self.entries
        entries.append(entry)
        if len(entries) == 1:
            heapq.heappush(engine.heap, (entry[0], entry[1], _lane_marker, self))


def _lane_marker(_: Any) -> None:  # in the heap: "the head of a lane is due"
    raise AssertionError("lane marker called")


class Engine:
    """Simulated time in seconds from the start of a run."""

    __slots__ = ("_lanes", "events", "heap", "now", "sequence")

    def __init__(self) -> None:
        self.now = 0.0
        self.events = 0
        self.heap: list[Entry] = []
        self.sequence = itertools.count()
        self._lanes: dict[float, Lane] = {}

    def at(self, when: float, callback: Callback, argument: Any = None) -> None:
        """Call ``callback(argument)`` at ``when``, which must not be before now."""
        heapq.heappush(self.heap, (when, next(self.sequence), callback, argument))

    def lane(self, delay: float) -> Lane:
        """The lane for ``delay`` (one per distinct delay)."""
        lane = self._lanes.get(delay)
        if lane is None:
            lane = self._lanes[delay] = Lane(self, delay)
        return lane

    def run(self, until: float) -> None:
        """Run every event up to ``until`` (inclusive); later ones stay unrun."""
        heap = self.heap
        pop, push = heapq.heappop, heapq.heappush
        count = 0
        while heap and heap[0][0] <= until:
            when, _, callback, argument = pop(heap)
            if callback is _lane_marker:
                entries = argument.entries
                _, _, callback, argument_ = entries.popleft()
                if entries:
                    head = entries[0]
                    push(heap, (head[0], head[1], _lane_marker, argument))
                argument = argument_
            self.now = when
            callback(argument)
            count += 1
        self.events += count
        self.now = until
