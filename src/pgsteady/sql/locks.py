"""The vocabulary of locks: the eight table lock modes, their conflicts, and lock targets.

Kept apart from :mod:`pgsteady.sql.analysis` (which re-exports every name here) so the
statement rules there stay one readable table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class LockMode(enum.StrEnum):
    """The eight table-level lock modes, weakest first."""

    ACCESS_SHARE = "ACCESS SHARE"
    ROW_SHARE = "ROW SHARE"
    ROW_EXCLUSIVE = "ROW EXCLUSIVE"
    SHARE_UPDATE_EXCLUSIVE = "SHARE UPDATE EXCLUSIVE"
    SHARE = "SHARE"
    SHARE_ROW_EXCLUSIVE = "SHARE ROW EXCLUSIVE"
    EXCLUSIVE = "EXCLUSIVE"
    ACCESS_EXCLUSIVE = "ACCESS EXCLUSIVE"

    @property
    def level(self) -> int:
        """1 (ACCESS SHARE) .. 8 (ACCESS EXCLUSIVE), as in PostgreSQL's lockdefs.h."""
        return _ORDER.index(self) + 1

    @property
    def pg_name(self) -> str:
        """The name ``pg_locks.mode`` uses, e.g. ``AccessExclusiveLock``."""
        return "".join(word.capitalize() for word in self.value.split()) + "Lock"

    @classmethod
    def from_pg_name(cls, name: str) -> LockMode:
        """``AccessShareLock`` -> ``LockMode.ACCESS_SHARE``; ValueError for row-level modes."""
        for mode in cls:
            if mode.pg_name == name:
                return mode
        raise ValueError(f"{name!r} is not a table lock mode")

    def conflicts_with(self, other: LockMode) -> bool:
        """True if a session holding ``other`` blocks one asking for ``self`` (and vice versa)."""
        return other.level in _CONFLICTS[self.level]

    def covers(self, other: LockMode) -> bool:
        """True if every lock that conflicts with ``other`` also conflicts with this one.

        That is "at least as strong" for blocking purposes: SHARE does not cover SHARE
        UPDATE EXCLUSIVE (the latter conflicts with itself), although its level is higher.
        """
        return _CONFLICTS[self.level] >= _CONFLICTS[other.level]


_ORDER = list(LockMode)
# PostgreSQL's conflict table (lock.c LockConflicts), by level; it is symmetric.
_CONFLICTS: dict[int, frozenset[int]] = {
    1: frozenset({8}),
    2: frozenset({7, 8}),
    3: frozenset({5, 6, 7, 8}),
    4: frozenset({4, 5, 6, 7, 8}),
    5: frozenset({3, 4, 6, 7, 8}),
    6: frozenset({3, 4, 5, 6, 7, 8}),
    7: frozenset({2, 3, 4, 5, 6, 7, 8}),
    8: frozenset({1, 2, 3, 4, 5, 6, 7, 8}),
}


class Reach(enum.StrEnum):
    """How a target's relation is found from the name written in the statement."""

    SELF = "self"  # the named relation
    INDEX_TABLE = "index table"  # the name is an index: its table (and its partitions')
    DESCENDANTS = "descendants"  # partitions and inheritance children, every level
    PARENT = "parent"  # the table a partition (or inheritance child) belongs to
    DEFAULT_PARTITION = "default partition"  # of the named partitioned table
    SIBLING_DEFAULT = "sibling default"  # the default partition next to the named partition
    DEPENDENT_VIEWS = "dependent views"  # views and materialized views reading the relation
    REFERENCED = "referenced"  # tables the named table's foreign keys point at
    REFERENCING = "referencing"  # tables whose foreign keys point at the named table
    READS = "reads"  # a view's (or materialized view's) base relations, through views
    STATISTICS = "statistics"  # the name is an extended statistics object: its table
    DOMAIN_USERS = "domain users"  # the name is a domain: tables with a column of it
    SCHEMA = "schema"  # the name is a schema: every table, view and sequence in it
    FUNCTION_USERS = "function users"  # the name is a function: tables with triggers on it


@dataclass(frozen=True)
class Target:
    """A relation a statement touches, as written in it, and the lock it takes there.

    With a ``reach`` other than SELF the lock falls on relations found from the named one
    through the catalog; ``only`` narrows that to foreign keys of one ``column:NAME`` or
    ``constraint:NAME``.
    """

    schema: str | None
    name: str
    lock: LockMode
    reach: Reach = Reach.SELF
    only: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name

    def describe(self) -> str:
        """``ACCESS EXCLUSIVE on tables child's foreign keys reference (column parent_id)``."""
        where = _REACH_WORDS[self.reach].format(self.qualified)
        if self.only:
            what, _, name = self.only.partition(":")
            where += f" ({what} {name})"
        return f"{self.lock} on {where}"


_REACH_WORDS: dict[Reach, str] = {
    Reach.SELF: "{}",
    Reach.INDEX_TABLE: "the table of index {}",
    Reach.DESCENDANTS: "the partitions and children of {}",
    Reach.PARENT: "the parent of {}",
    Reach.DEFAULT_PARTITION: "the default partition of {}",
    Reach.SIBLING_DEFAULT: "the default partition beside {}",
    Reach.DEPENDENT_VIEWS: "the views reading {}",
    Reach.REFERENCED: "the tables {}'s foreign keys reference",
    Reach.REFERENCING: "the tables whose foreign keys reference {}",
    Reach.READS: "what view {} reads",
    Reach.STATISTICS: "the table of statistics {}",
    Reach.DOMAIN_USERS: "the tables with a column of domain {}",
    Reach.SCHEMA: "everything in schema {}",
    Reach.FUNCTION_USERS: "the tables with a trigger calling {}",
}


def join(a: LockMode, b: LockMode) -> LockMode:
    """The weakest mode that covers both (SHARE + SHARE UPDATE EXCLUSIVE: SHARE ROW EXCL.)."""
    return next(m for m in _ORDER if m.covers(a) and m.covers(b))
