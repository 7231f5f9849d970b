"""What queries and data changes lock: the relations they read and write, as lock targets.

Part of the statement analysis (:mod:`pgsteady.sql.analysis` holds the rules for DDL and
utility statements, and uses these for the queries inside them: a view's definition, CREATE
TABLE AS, a rule's actions, a function's SQL body).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from pglast import ast

from pgsteady.sql.locks import LockMode, Reach, Target

AS = LockMode.ACCESS_SHARE
RS = LockMode.ROW_SHARE
RE = LockMode.ROW_EXCLUSIVE
Described = tuple[str, list[Target], bool]


def rv(node: Any, lock: LockMode, reach: Reach = Reach.SELF, only: str | None = None) \
        -> Target:
    return Target(node.schemaname or None, node.relname, lock, reach, only)


def names(parts: Any, lock: LockMode, reach: Reach = Reach.SELF) -> Target:
    """A dotted name given as a tuple of String nodes (DROP, COMMENT ON)."""
    words = [p.sval for p in parts]
    return Target(words[-2] if len(words) > 1 else None, words[-1], lock, reach)


def tree(target: Target, *reaches: Reach) -> list[Target]:
    """``target`` and the same lock through each of ``reaches``."""
    return [target, *(replace(target, reach=r) for r in reaches)]


def reads(node: Any, lock: LockMode = AS, *, expand: bool = True,
          stronger: frozenset[str] = frozenset()) -> list[Target]:
    """What a query (or expression) reads: each relation, what views expand to, partitions.

    ``expand=False``: the query is only parsed (a view's definition), so views and
    partitioned tables are not expanded. ``stronger``: names (as written) that get ``lock``
    while the others get ACCESS SHARE (``FOR UPDATE OF a``). CTE names show up as RangeVars
    too; they resolve to nothing, or to a same-named table (a harmless over-approximation)."""
    out: list[Target] = []
    for item in walk(node):
        if isinstance(item, ast.RangeVar):
            reaches: tuple[Reach, ...] = () if not expand else \
                (Reach.READS, Reach.DESCENDANTS) if item.inh else (Reach.READS,)
            mode = lock if not stronger or _written(item) in stronger else AS
            out += tree(rv(item, mode), *reaches)
        elif isinstance(item, ast.FuncCall):
            out += sequence_call(item)
    return out


SEQUENCE_FUNCTIONS = {"nextval": RE, "setval": RE, "currval": AS}


def sequence_call(call: Any) -> list[Target]:
    """``nextval('s')`` / ``setval('s', n)`` lock sequence s ROW EXCLUSIVE."""
    name = call.funcname[-1].sval if call.funcname else ""
    if name not in SEQUENCE_FUNCTIONS or not call.args:
        return []
    arg = call.args[0]
    if isinstance(arg, ast.TypeCast):
        arg = arg.arg
    value = getattr(getattr(arg, "val", None), "sval", None)
    if not isinstance(value, str):
        return []
    schema, _, relname = value.rpartition(".")
    return [Target(schema or None, relname, SEQUENCE_FUNCTIONS[name])]


def dml(kind: str) -> Any:
    def describe(node: Any) -> Described:
        target = rv(node.relation, RE)
        reaches = [Reach.READS]  # an updatable view writes its base table
        if node.relation.inh:
            reaches.append(Reach.DESCENDANTS)
        targets = tree(target, *reaches)
        # Foreign key checks: new rows lock the rows they point at (FOR KEY SHARE), and
        # changed or deleted keys act on the referencing rows.
        if not isinstance(node, ast.DeleteStmt):
            targets.append(rv(node.relation, RS, Reach.REFERENCED))
        if not isinstance(node, ast.InsertStmt):
            targets.append(rv(node.relation, RE, Reach.REFERENCING))
        for attr in ("selectStmt", "fromClause", "usingClause", "whereClause", "withClause",
                     "returningList", "targetList", "onConflictClause", "sourceRelation",
                     "joinCondition", "mergeWhenClauses"):
            value = getattr(node, attr, None)
            if value is not None:
                targets += reads(value)
        return kind, targets, True
    return describe


def select(node: Any) -> Described:
    if node.intoClause is not None:
        return "SELECT INTO", reads(node), True
    if not node.lockingClause:
        return "SELECT", reads(node), True
    # FOR UPDATE / SHARE: ROW SHARE on the relations it locks rows of (all, or those after OF).
    named = [rel for clause in node.lockingClause for rel in clause.lockedRels or ()]
    stronger = frozenset(_written(rel) for rel in named)
    if any(not clause.lockedRels for clause in node.lockingClause):
        stronger = frozenset()  # a clause without OF: every relation
    return "SELECT ... FOR UPDATE/SHARE", reads(node, RS, stronger=stronger), True


def _written(rel: Any) -> str:
    """A relation (or an alias, after OF) as written: the name a FOR ... OF clause uses."""
    alias = getattr(getattr(rel, "alias", None), "aliasname", None)
    return str(alias or rel.relname)


def walk(node: Any) -> Iterator[Any]:
    """Every AST node under ``node`` (CTE names show up as RangeVars too; harmless)."""
    if isinstance(node, tuple):
        for item in node:
            yield from walk(item)
    elif isinstance(node, ast.Node):
        yield node
        for attr in node:
            yield from walk(getattr(node, attr))


def copy(node: Any) -> Described:
    if node.relation is None:
        return "COPY (query) TO", reads(node.query), True
    if node.is_from:
        return "COPY FROM", [*tree(rv(node.relation, RE), Reach.DESCENDANTS),
                             rv(node.relation, RS, Reach.REFERENCED)], True
    return "COPY TO", [rv(node.relation, AS)], True
