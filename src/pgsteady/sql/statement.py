"""One statement of a script as the lock oracle describes it: where it is, what it is, what it
locks, which functions it runs and which tables' triggers it fires.

Kept apart from :mod:`pgsteady.sql.analysis` (which re-exports every name here) so the
statement rules there stay one readable table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgsteady.sql.locks import LockMode, Target
from pgsteady.sql.reads import Write

OPAQUE_KINDS = frozenset({"DO", "CALL", "DROP OWNED", "REASSIGN OWNED", "EXECUTE",
                          "ALTER ... ALL IN TABLESPACE", "IMPORT FOREIGN SCHEMA",
                          "ALTER EXTENSION"})


@dataclass(frozen=True)
class StatementInfo:
    """One statement of a script: where it is, what it is, what it locks."""

    sql: str
    line: int
    col: int
    kind: str
    targets: tuple[Target, ...]
    transactional: bool
    node: Any
    #: Functions (and a CALL's procedure) it runs, as written (:func:`~pgsteady.sql.reads.calls`).
    calls: tuple[str, ...] = ()
    #: Relations it changes rows of, whose triggers fire (:func:`~pgsteady.sql.reads.writes`).
    writes: tuple[Write, ...] = ()

    @property
    def strongest_lock(self) -> LockMode | None:
        return max((t.lock for t in self.targets), key=lambda m: m.level, default=None)

    @property
    def opaque(self) -> bool:
        """True when the text cannot say what the statement locks (``DO``, ``CALL``)."""
        return self.kind in OPAQUE_KINDS


class SqlSyntaxError(ValueError):
    """The text does not parse; ``line`` and ``col`` (1-based) point at the error."""

    def __init__(self, message: str, line: int, col: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col

    def __str__(self) -> str:
        return f"line {self.line}, column {self.col}: {self.message}"


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of character ``offset`` in ``text``."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
