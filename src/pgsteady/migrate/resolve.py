"""Lock targets, as written in a statement, -> the existing relations they lock, by oid.

:mod:`~pgsteady.sql.analysis` works on text; this follows each target's
:class:`~pgsteady.sql.analysis.Reach` through a live catalog: an index to its table, a
foreign key to its other table, a partitioned table to its partitions, a partition to its
parent, a view to what it reads. Preflight, the blocker lookup after a failed try and the
lock-oracle test all use this one function, so what is proven is what is used.

Reads only the catalog (``to_regclass``, ``pg_inherits``, ``pg_constraint``, ...): nothing
here takes a lock on a user relation, so it can never queue behind a migration.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from pgsteady.migrate import queries
from pgsteady.sql.analysis import LockMode, Reach, Target

# How each reach is said when naming why a relation is locked.
_VIA: dict[Reach, str] = {
    Reach.INDEX_TABLE: "the table of index {}",
    Reach.DESCENDANTS: "a partition or child of {}",
    Reach.PARENT: "the parent of {}",
    Reach.DEFAULT_PARTITION: "the default partition of {}",
    Reach.REFERENCED: "referenced by a foreign key of {}",
    Reach.REFERENCING: "has a foreign key to {}",
    Reach.READS: "read by {}",
    Reach.STATISTICS: "the table of statistics {}",
    Reach.DOMAIN_USERS: "has a column of domain {}",
    Reach.SCHEMA: "in schema {}",
    Reach.SIBLING_DEFAULT: "the default partition next to {}",
    Reach.DEPENDENT_VIEWS: "a view reading {}",
    Reach.FUNCTION_USERS: "has a trigger calling {}",
}


@dataclass(frozen=True)
class Locked:
    """An existing relation a statement locks, and how it was reached."""

    oid: int
    relation: str  # schema.name
    lock: LockMode
    via: str  # "" for the relation named in the statement, else why it is locked too
    index_of: int | None = None  # for an index: its table's oid


def relations(conn: psycopg.Connection[Any], targets: Iterable[Target],
              cache: dict[str, Any] | None = None) -> list[Locked]:
    """Every existing relation ``targets`` lock; targets that do not exist yet are skipped.

    ``cache`` (any dict, kept by the caller across calls on one catalog state) saves looking
    the same name up twice; reaches a relation cannot have (partitions of a plain table, the
    base tables of a table) are not asked for."""
    found: list[Locked] = []
    cache = {} if cache is None else cache
    for target in targets:
        if target.reach in queries.REACH_BY_NAME:
            params = {"name": target.name, "schema": target.schema,
                      "qualified": _quoted(conn, target)}
            rows = conn.execute(queries.REACH_BY_NAME[target.reach], params).fetchall()
            via = _VIA[target.reach].format(target.qualified)
            found += [Locked(int(oid), str(name), target.lock, via) for oid, name in rows]
            continue
        quoted = _quoted(conn, target)
        if quoted not in cache:
            cache[quoted] = conn.execute(queries.RESOLVE_TARGET, {"name": quoted}).fetchone()
        row = cache[quoted]
        if row is None:  # not there yet (an earlier pending migration creates it)
            continue
        oid, name, relkind, has_children, is_partition, table_oid = row
        if target.reach == Reach.SELF:
            found.append(Locked(int(oid), str(name), target.lock, "", table_oid))
            continue
        if not _may_reach(target.reach, relkind, has_children, is_partition):
            continue
        column, constraint = _only(target.only)
        rows = conn.execute(queries.REACH_QUERIES[target.reach], {
            "oid": oid, "column": column, "constraint": constraint}).fetchall()
        via = _VIA[target.reach].format(name)
        found += [Locked(int(o), str(n), target.lock, via) for o, n in rows if o != oid]
    return found


def prefetch(conn: psycopg.Connection[Any], targets: Iterable[Target]) -> dict[str, Any]:
    """A ``cache`` for :func:`relations` holding every name ``targets`` use, in one query."""
    names = sorted({_quoted(conn, t) for t in targets if t.reach not in queries.REACH_BY_NAME})
    cache: dict[str, Any] = dict.fromkeys(names)
    if names:
        for name, *row in conn.execute(queries.RESOLVE_TARGETS, {"names": names}).fetchall():
            cache[name] = tuple(row)
    return cache


def _may_reach(reach: Reach, relkind: str, has_children: bool, is_partition: bool) -> bool:
    """False when the catalog row alone says the reach finds nothing (saves a query)."""
    if reach == Reach.DESCENDANTS:
        return has_children
    if reach in (Reach.PARENT, Reach.SIBLING_DEFAULT):
        return is_partition
    if reach == Reach.DEFAULT_PARTITION:
        return relkind == "p"
    if reach == Reach.READS:
        return relkind in ("v", "m")
    if reach == Reach.INDEX_TABLE:
        return relkind in ("i", "I")
    return True


def _quoted(conn: psycopg.Connection[Any], target: Target) -> str:
    parts = (target.schema, target.name) if target.schema else (target.name,)
    return sql.Identifier(*parts).as_string(conn)


def _only(only: str | None) -> tuple[str | None, str | None]:
    """``column:x`` -> (x, None); ``constraint:x`` -> (None, x); None -> (None, None)."""
    if only is None:
        return None, None
    what, _, name = only.partition(":")
    return (name, None) if what == "column" else (None, name)
