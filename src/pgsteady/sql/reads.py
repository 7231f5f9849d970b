"""What queries and data changes lock: the relations they read and write, as lock targets.

Part of the statement analysis (:mod:`pgsteady.sql.analysis` holds the rules for DDL and
utility statements, and uses these for the queries inside them: a view's definition, CREATE
TABLE AS, a rule's actions, a function's SQL body).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from pglast import ast, enums

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
          stronger: frozenset[str] = frozenset(),
          ctes: frozenset[str] = frozenset()) -> list[Target]:
    """What a query (or expression) reads: each relation, what views expand to, partitions.

    ``expand=False``: the query is only parsed (a view's definition), so views and
    partitioned tables are not expanded. ``stronger``: names (as written) that get ``lock``
    while the others get ACCESS SHARE (``FOR UPDATE OF a``). A reference to a CTE in scope
    (an unqualified name a WITH above it, or ``ctes``, defines) is the CTE, not a table: left
    out."""
    out: list[Target] = []
    for item in _scoped(node, ctes):
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
        # The statement's own WITH names are CTEs in every part of it, not tables.
        scope = frozenset(cte.ctename for cte in getattr(getattr(node, "withClause", None),
                                                         "ctes", None) or ())
        for attr in ("selectStmt", "fromClause", "usingClause", "whereClause", "withClause",
                     "returningList", "targetList", "onConflictClause", "sourceRelation",
                     "joinCondition", "mergeWhenClauses"):
            value = getattr(node, attr, None)
            if value is not None:
                targets += reads(value, ctes=scope)
        return kind, targets + writable_ctes(node), True
    return describe


_DML_KINDS = {ast.InsertStmt: "INSERT", ast.UpdateStmt: "UPDATE", ast.DeleteStmt: "DELETE",
              ast.MergeStmt: "MERGE"}


def writable_ctes(node: Any) -> list[Target]:
    """What the data changes in a statement's WITH lock (``WITH d AS (DELETE FROM a ...)``):
    read as a query they would only be ACCESS SHARE, but they write (ROW EXCLUSIVE). PostgreSQL
    allows them in the top-level WITH only."""
    ctes = getattr(getattr(node, "withClause", None), "ctes", None) or ()
    return [t for cte in ctes if type(query := getattr(cte, "ctequery", None)) in _DML_KINDS
            for t in dml(_DML_KINDS[type(query)])(query)[1]]


@dataclass(frozen=True)
class Write:
    """A relation a statement changes rows of, as written, and the trigger events it fires
    (``INSERT``, ``UPDATE``, ``DELETE``, ``TRUNCATE``); ``inh``: its partitions and children
    too."""

    schema: str | None
    name: str
    events: frozenset[str]
    inh: bool = True


_EVENTS = {ast.InsertStmt: {"INSERT"}, ast.UpdateStmt: {"UPDATE"}, ast.DeleteStmt: {"DELETE"},
           ast.MergeStmt: {"INSERT", "UPDATE", "DELETE"}}


def writes(node: Any) -> list[Write]:
    """The relations whose triggers a statement fires: its own data change, the ones in its
    WITH, ``COPY FROM`` and ``TRUNCATE`` (an ``INSERT ... ON CONFLICT DO UPDATE`` may update)."""
    if isinstance(node, ast.ExplainStmt):
        analysed = "analyze" in {str(d.defname) for d in node.options or ()
                                 if isinstance(d, ast.DefElem)}
        return writes(node.query) if analysed else []
    if isinstance(node, ast.CopyStmt):
        return [_write(node.relation, {"INSERT"})] if node.is_from and node.relation else []
    if isinstance(node, ast.TruncateStmt):
        return [_write(rel, {"TRUNCATE"}) for rel in node.relations or ()]
    found: list[Write] = []
    if type(node) in _EVENTS:
        events = set(_EVENTS[type(node)])
        if isinstance(node, ast.InsertStmt) and node.onConflictClause is not None and \
                node.onConflictClause.action == enums.OnConflictAction.ONCONFLICT_UPDATE:
            events.add("UPDATE")
        found.append(_write(node.relation, events))
    if isinstance(node, (ast.SelectStmt, *_EVENTS)):
        ctes = getattr(getattr(node, "withClause", None), "ctes", None) or ()
        found += [w for cte in ctes for w in writes(getattr(cte, "ctequery", None))]
    return found


def _write(relation: Any, events: set[str]) -> Write:
    return Write(relation.schemaname or None, relation.relname, frozenset(events),
                 bool(relation.inh))


# Statements whose expressions are stored, not run, when the statement runs.
_STORED = (ast.CreateFunctionStmt, ast.ViewStmt, ast.RuleStmt, ast.CreatePolicyStmt,
           ast.AlterPolicyStmt, ast.CreateStmt, ast.CreateDomainStmt, ast.CreateTrigStmt,
           ast.PrepareStmt, ast.DeclareCursorStmt)


def calls(node: Any) -> list[str]:
    """The functions (and a CALL's procedure) a statement runs, as written: ``schema.name`` or
    ``name``. Functions PostgreSQL's grammar names itself (``EXTRACT(... FROM ...)``,
    ``SUBSTRING(... FROM ...)``) are left out: they are its own, whatever a major calls them."""
    if isinstance(node, _STORED):
        return []
    found: list[Any] = [item for item in walk(node) if isinstance(item, ast.FuncCall)
                        and item.funcformat != enums.CoercionForm.COERCE_SQL_SYNTAX]
    return list(dict.fromkeys(".".join(p.sval for p in call.funcname) for call in found))


def select(node: Any) -> Described:
    if node.intoClause is not None:
        return "SELECT INTO", reads(node) + writable_ctes(node), True
    if not node.lockingClause:
        return "SELECT", reads(node) + writable_ctes(node), True
    # FOR UPDATE / SHARE: ROW SHARE on the relations it locks rows of (all, or those after OF).
    named = [rel for clause in node.lockingClause for rel in clause.lockedRels or ()]
    stronger = frozenset(_written(rel) for rel in named)
    if any(not clause.lockedRels for clause in node.lockingClause):
        stronger = frozenset()  # a clause without OF: every relation
    return "SELECT ... FOR UPDATE/SHARE", reads(node, RS, stronger=stronger) + \
        writable_ctes(node), True


def _written(rel: Any) -> str:
    """A relation (or an alias, after OF) as written: the name a FOR ... OF clause uses."""
    alias = getattr(getattr(rel, "alias", None), "aliasname", None)
    return str(alias or rel.relname)


def _scoped(node: Any, ctes: frozenset[str]) -> Iterator[Any]:
    """Every AST node under ``node``, but the RangeVars that name a CTE in scope: a WITH's
    names are visible in its own statement (its CTEs included, for WITH RECURSIVE), as
    PostgreSQL resolves them."""
    if isinstance(node, tuple):
        for item in node:
            yield from _scoped(item, ctes)
        return
    if not isinstance(node, ast.Node):
        return
    if isinstance(node, ast.RangeVar) and not node.schemaname and node.relname in ctes:
        return
    with_clause = getattr(node, "withClause", None)
    if isinstance(with_clause, ast.WithClause):
        ctes = ctes | {cte.ctename for cte in with_clause.ctes or ()}
    yield node
    for attr in node:
        yield from _scoped(getattr(node, attr), ctes)


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
