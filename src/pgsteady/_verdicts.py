"""The verdict words, what each means and its colour: one vocabulary for every view of a run.

The lab's terminal tables and PNG charts, the model's tables, ``sim validate``, the HTML page
and the JSON files all take their words and colours from here, so one run reads the same
everywhere (issue 31: one steady run used to be "held" in its chart, "recovered" on the page
and "recovered 0/1" in ``sim validate``). No imports beyond the standard library: the lint
path, the report and the labs may all read it.

Pool drain (``pool_drain``), from answers per second, the last third against the first:

- **held**: back to >= 90 % and no caller's deadline passed: nobody noticed the trigger.
- **recovered**: back to >= 90 %, but some callers' deadlines passed on the way.
- **degraded**: between 10 % and 90 %: neither back nor gone.
- **collapsed**: below 10 %: the pool did not outlive the trigger.

Lock queue: **outage** when uncached lookups were answered below 50 % for 10 s in a row, else
**held**. A check (``sim validate``) **passed** or **failed**.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Tone = Literal["good", "warn", "bad"]

# One colour per tone, in the charts, the terminal and the page (its light theme's --good,
# --warn and --bad): green, amber, red.
COLOURS: dict[Tone, str] = {"good": "#2e7d32", "warn": "#b26a00", "bad": "#c62828"}


@dataclass(frozen=True)
class Verdict:
    word: str
    tone: Tone
    meaning: str

    @property
    def colour(self) -> str:
        return COLOURS[self.tone]


HELD = Verdict("held", "good", "answers stayed up and no caller's deadline passed")
RECOVERED = Verdict("recovered", "good", "some callers' deadlines passed during the trigger, "
                    "and the pool was back (>= 90 % of the first third's answers per second) "
                    "by the last third")
DEGRADED = Verdict("degraded", "warn", "the last third answered between 10 % and 90 % of "
                   "the first third's answers per second")
COLLAPSED = Verdict("collapsed", "bad", "the last third answered < 10 % of the first third's "
                    "answers per second: the pool did not outlive the trigger")
OUTAGE = Verdict("outage", "bad", "uncached lookups were answered < 50 % for 10 s or more in "
                 "a row")
LOCK_QUEUE_HELD = Verdict("held", "good", "uncached lookups never stayed below 50 % answered "
                          "for 10 s")
PASSED = Verdict("passed", "good", "the check met its bars")
FAILED = Verdict("failed", "bad", "the check missed a bar")
UNKNOWN = Verdict("unknown", "warn", "the file says nothing this pgsteady can judge")

POOL_DRAIN = (HELD, RECOVERED, DEGRADED, COLLAPSED)   # best first
LOCK_QUEUE = (LOCK_QUEUE_HELD, OUTAGE)
_BY_WORD = {v.word: v for v in (*POOL_DRAIN, OUTAGE, PASSED, FAILED, UNKNOWN)}


def of(word: str) -> Verdict:
    """The verdict a word names; a word this vocabulary lacks (a newer file's) is ``warn``."""
    return _BY_WORD.get(word) or Verdict(word, "warn", "")


def tone(word: str) -> Tone:
    return of(word).tone


def colour(word: str) -> str:
    return of(word).colour


def pool_drain(collapsed: bool, recovered: bool, timeouts: int) -> Verdict:
    """The pool-drain verdict from the lab's two flags and the run's timed-out callers."""
    if collapsed:
        return COLLAPSED
    if recovered:
        return RECOVERED if timeouts else HELD
    return DEGRADED


def pool_back(word: str) -> bool:
    """held and recovered both mean the pool was back by the last third: what ``sim
    validate`` compares (the model's timed-out callers are less exact than its throughput)."""
    return word in (HELD.word, RECOVERED.word)


def rich(word: str) -> str:
    """The word as rich markup in its colour (bold when bad)."""
    v = of(word)
    style = f"bold {v.colour}" if v.tone == "bad" else v.colour
    return f"[{style}]{_escape(v.word)}[/]"


def _escape(text: str) -> str:
    return text.replace("[", r"\[")


def counts(words: Iterable[str], order: Sequence[Verdict] = POOL_DRAIN) -> list[tuple[str, int]]:
    """(word, runs) for each word that occurs, in the vocabulary's order (best first)."""
    seen: dict[str, int] = {}
    for word in words:
        seen[word] = seen.get(word, 0) + 1
    rank = {v.word: i for i, v in enumerate(order)}
    return sorted(seen.items(), key=lambda item: rank.get(item[0], len(rank)))


# -- a ceiling below what a run achieved ---------------------------------------------------------

CEILING_LOW_NOTE = ("above 100 % of the ceiling: pgbench's ceiling measured low (the "
                    "machine's speed drifted between that measurement and the run; in the "
                    "model, its estimate is a little low), not a strategy faster than the "
                    "database")


def ceiling_low(answered: Sequence[float], ceiling: float) -> bool:
    """Whether a run answered more per second than the pgbench ceiling it is measured against
    (every second but the first, which holds the workers' start-up): then the ceiling is
    what is wrong, and every view showing the share says so (:data:`CEILING_LOW_NOTE`)."""
    after_first = list(answered[1:])
    return bool(ceiling > 0 and after_first and sum(after_first) / len(after_first) > ceiling)
