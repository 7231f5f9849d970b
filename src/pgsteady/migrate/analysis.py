"""What each SQL statement locks: statement -> (relations, lock mode), parsed with pglast.

Shared by ``migrate`` (preflight, ``--plan``, naming blockers) and the linter. It works on
text alone, so it names relations as written; resolving them (search_path, index -> table)
is the caller's job against a live catalog. Lock levels follow the PostgreSQL 15 manual
("Explicit Locking" and each command's page); a statement it does not know gets no targets
rather than a guess.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pglast
from pglast import ast, enums
from pglast.parser import ParseError


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


@dataclass(frozen=True)
class Target:
    """A relation a statement touches, as written in it, and the lock it takes there."""

    schema: str | None
    name: str
    lock: LockMode

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


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

    @property
    def strongest_lock(self) -> LockMode | None:
        return max((t.lock for t in self.targets), key=lambda m: m.level, default=None)


class SqlSyntaxError(ValueError):
    """The text does not parse; ``line`` and ``col`` (1-based) point at the error."""

    def __init__(self, message: str, line: int, col: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col

    def __str__(self) -> str:
        return f"line {self.line}, column {self.col}: {self.message}"


def analyze(sql: str) -> list[StatementInfo]:
    """Split ``sql`` into statements and say what each one locks.

    Raises :class:`SqlSyntaxError` if the text does not parse.
    """
    try:
        raw = pglast.parse_sql(sql)
    except ParseError as exc:
        message = str(exc.args[0]) if exc.args else "syntax error"
        cursor = exc.args[1] if len(exc.args) > 1 else None
        # No cursor means "at end of input": point after the last non-blank character.
        offset = int(cursor) if isinstance(cursor, int) else len(sql.rstrip())
        line, col = line_col(sql, offset)
        raise SqlSyntaxError(message, line, col) from None
    out = []
    for item in raw:
        start = item.stmt_location or 0
        end = start + item.stmt_len if item.stmt_len else len(sql)
        start = _skip_blanks(sql, start, end)
        text = sql[start:end].strip().rstrip(";").rstrip()
        line, col = line_col(sql, start)
        kind, targets, transactional = _describe(item.stmt)
        out.append(StatementInfo(text, line, col, kind, tuple(_merge(targets)), transactional,
                                 item.stmt))
    return out


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of character ``offset`` in ``text``."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _skip_blanks(text: str, pos: int, end: int) -> int:
    """Move past whitespace and comments, so a statement's position is its first word."""
    while pos < end:
        if text[pos].isspace():
            pos += 1
        elif text.startswith("--", pos):
            newline = text.find("\n", pos)
            pos = end if newline < 0 else newline + 1
        elif text.startswith("/*", pos):
            close = text.find("*/", pos + 2)
            pos = end if close < 0 else close + 2
        else:
            break
    return pos


def _merge(targets: Iterable[Target]) -> Iterator[Target]:
    """One target per relation, with the strongest lock asked for it."""
    best: dict[tuple[str | None, str], Target] = {}
    for target in targets:
        key = (target.schema, target.name)
        if key not in best or target.lock.level > best[key].lock.level:
            best[key] = target
    yield from best.values()


def _rv(node: Any, lock: LockMode) -> Target:
    return Target(node.schemaname or None, node.relname, lock)


def _names(parts: Any, lock: LockMode) -> Target:
    """A dotted name given as a tuple of String nodes (DROP, COMMENT ON)."""
    names = [p.sval for p in parts]
    return Target(names[-2] if len(names) > 1 else None, names[-1], lock)


def _option_names(options: Any) -> set[str]:
    return {str(d.defname) for d in options or () if isinstance(d, ast.DefElem)}


AE = LockMode.ACCESS_EXCLUSIVE
SUE = LockMode.SHARE_UPDATE_EXCLUSIVE
SRE = LockMode.SHARE_ROW_EXCLUSIVE
AT = enums.AlterTableType
# ALTER TABLE subcommands that take less than ACCESS EXCLUSIVE (manual, "ALTER TABLE").
_ALTER_LOCKS: dict[Any, LockMode] = {
    AT.AT_SetStatistics: SUE,
    AT.AT_ClusterOn: SUE,
    AT.AT_DropCluster: SUE,
    AT.AT_SetRelOptions: SUE,
    AT.AT_ResetRelOptions: SUE,
    AT.AT_ValidateConstraint: SUE,
    AT.AT_AttachPartition: SUE,
    AT.AT_EnableTrig: SRE,
    AT.AT_EnableAlwaysTrig: SRE,
    AT.AT_EnableReplicaTrig: SRE,
    AT.AT_DisableTrig: SRE,
    AT.AT_EnableTrigAll: SRE,
    AT.AT_DisableTrigAll: SRE,
    AT.AT_EnableTrigUser: SRE,
    AT.AT_DisableTrigUser: SRE,
}
_ALTER_KINDS: dict[Any, str] = {
    AT.AT_AddColumn: "ADD COLUMN",
    AT.AT_DropColumn: "DROP COLUMN",
    AT.AT_AlterColumnType: "ALTER COLUMN TYPE",
    AT.AT_ColumnDefault: "ALTER COLUMN SET DEFAULT",
    AT.AT_SetNotNull: "SET NOT NULL",
    AT.AT_DropNotNull: "DROP NOT NULL",
    AT.AT_AddConstraint: "ADD CONSTRAINT",
    AT.AT_DropConstraint: "DROP CONSTRAINT",
    AT.AT_ValidateConstraint: "VALIDATE CONSTRAINT",
    AT.AT_AttachPartition: "ATTACH PARTITION",
    AT.AT_DetachPartition: "DETACH PARTITION",
    AT.AT_SetTableSpace: "SET TABLESPACE",
    AT.AT_SetLogged: "SET LOGGED",
    AT.AT_SetUnLogged: "SET UNLOGGED",
}
_DROP_RELATIONS = {
    enums.ObjectType.OBJECT_TABLE, enums.ObjectType.OBJECT_INDEX,
    enums.ObjectType.OBJECT_VIEW, enums.ObjectType.OBJECT_MATVIEW,
    enums.ObjectType.OBJECT_SEQUENCE, enums.ObjectType.OBJECT_FOREIGN_TABLE,
}
_NOT_IN_TRANSACTION = (ast.CreatedbStmt, ast.DropdbStmt, ast.AlterSystemStmt,
                       ast.CreateTableSpaceStmt, ast.DropTableSpaceStmt)

Described = tuple[str, list[Target], bool]


def _describe(node: Any) -> Described:
    """(kind, targets, transactional) for one statement node."""
    handler = _HANDLERS.get(type(node))
    if handler is not None:
        described: Described = handler(node)
        return described
    kind = type(node).__name__.removesuffix("Stmt")
    return kind, [], not isinstance(node, _NOT_IN_TRANSACTION)


def _alter_table(node: Any) -> Described:
    obj = "INDEX" if node.objtype == enums.ObjectType.OBJECT_INDEX else "TABLE"
    targets, kinds, transactional = [], [], True
    for cmd in node.cmds or ():
        lock = _ALTER_LOCKS.get(cmd.subtype, AE)
        kinds.append(_ALTER_KINDS.get(cmd.subtype, cmd.subtype.name.removeprefix("AT_")))
        definition = cmd.def_
        if cmd.subtype == AT.AT_AddConstraint and isinstance(definition, ast.Constraint):
            if definition.contype == enums.ConstrType.CONSTR_FOREIGN:
                lock = SRE  # both tables; the referenced one too
                kinds[-1] = "ADD FOREIGN KEY"
                targets.append(_rv(definition.pktable, SRE))
            elif definition.contype == enums.ConstrType.CONSTR_CHECK and definition.skip_validation:
                kinds[-1] = "ADD CHECK NOT VALID"
        if isinstance(definition, ast.PartitionCmd):
            if cmd.subtype == AT.AT_DetachPartition and definition.concurrent:
                lock, transactional = SUE, False
                kinds[-1] = "DETACH PARTITION CONCURRENTLY"
            targets.append(_rv(definition.name, AE))
        if isinstance(definition, ast.ColumnDef):
            targets += _column_references(definition)
        targets.append(_rv(node.relation, lock))
    kind = f"ALTER {obj} ... " + ", ".join(dict.fromkeys(kinds)) if kinds else f"ALTER {obj}"
    return kind, targets, transactional


def _column_references(column: Any) -> list[Target]:
    return [_rv(c.pktable, SRE) for c in column.constraints or ()
            if isinstance(c, ast.Constraint) and c.contype == enums.ConstrType.CONSTR_FOREIGN]


def _create_table(node: Any) -> Described:
    targets = []
    for element in node.tableElts or ():
        if isinstance(element, ast.ColumnDef):
            targets += _column_references(element)
        elif isinstance(element, ast.Constraint) and \
                element.contype == enums.ConstrType.CONSTR_FOREIGN:
            targets.append(_rv(element.pktable, SRE))
    if node.partbound is not None:
        targets += [_rv(parent, AE) for parent in node.inhRelations or ()]
        return "CREATE TABLE ... PARTITION OF", targets, True
    return "CREATE TABLE", targets, True


def _index(node: Any) -> Described:
    if node.concurrent:
        return "CREATE INDEX CONCURRENTLY", [_rv(node.relation, SUE)], False
    return "CREATE INDEX", [_rv(node.relation, LockMode.SHARE)], True


def _drop(node: Any) -> Described:
    kind = "DROP " + node.removeType.name.removeprefix("OBJECT_").replace("_", " ")
    if node.removeType not in _DROP_RELATIONS:
        return kind, [], True
    if node.concurrent:
        return kind + " CONCURRENTLY", [_names(o, SUE) for o in node.objects], False
    return kind, [_names(o, AE) for o in node.objects], True


def _reindex(node: Any) -> Described:
    concurrently = "concurrently" in _option_names(node.params)
    what = node.kind.name.removeprefix("REINDEX_OBJECT_")
    if node.relation is None:  # SCHEMA / DATABASE / SYSTEM: not resolvable from text
        return f"REINDEX {what}", [], not concurrently and what == "INDEX"
    # REINDEX INDEX locks the index ACCESS EXCLUSIVE (its table SHARE); REINDEX TABLE does
    # that to every index of the table, which every reader of the table also locks: for
    # conflicts it is as strong as ACCESS EXCLUSIVE on the table itself.
    lock = SUE if concurrently else AE
    kind = f"REINDEX {what}" + (" CONCURRENTLY" if concurrently else "")
    return kind, [_rv(node.relation, lock)], not concurrently


def _vacuum(node: Any) -> Described:
    options = _option_names(node.options)
    rels = [v.relation for v in node.rels or () if v.relation is not None]
    if not node.is_vacuumcmd:
        return "ANALYZE", [_rv(r, SUE) for r in rels], True
    lock, kind = (AE, "VACUUM FULL") if "full" in options else (SUE, "VACUUM")
    return kind, [_rv(r, lock) for r in rels], False


def _lock(node: Any) -> Described:
    mode = _ORDER[int(node.mode) - 1]
    return f"LOCK TABLE IN {mode} MODE", [_rv(r, mode) for r in node.relations], True


def _refresh(node: Any) -> Described:
    if node.concurrent:
        return "REFRESH MATERIALIZED VIEW CONCURRENTLY", [
            _rv(node.relation, LockMode.EXCLUSIVE)], True
    return "REFRESH MATERIALIZED VIEW", [_rv(node.relation, AE)], True


def _rename(node: Any) -> Described:
    what = node.renameType.name.removeprefix("OBJECT_").replace("_", " ")
    if node.relation is None:
        return f"ALTER {what} ... RENAME", [], True
    # Renaming an index takes only SHARE UPDATE EXCLUSIVE since PostgreSQL 12.
    lock = SUE if node.renameType == enums.ObjectType.OBJECT_INDEX else AE
    return f"ALTER {what} ... RENAME", [_rv(node.relation, lock)], True


def _comment(node: Any) -> Described:
    if node.objtype in _DROP_RELATIONS and isinstance(node.object, tuple):
        return "COMMENT ON", [_names(node.object, SUE)], True
    return "COMMENT ON", [], True


def _dml(kind: str, lock: LockMode) -> Any:
    def describe(node: Any) -> Described:
        return kind, [_rv(node.relation, lock)], True
    return describe


def _select(node: Any) -> Described:
    rels = [n for n in _walk(node) if isinstance(n, ast.RangeVar)]
    return "SELECT", [_rv(r, LockMode.ACCESS_SHARE) for r in rels], True


def _walk(node: Any) -> Iterator[Any]:
    """Every AST node under ``node`` (CTE names show up as RangeVars too; harmless)."""
    if isinstance(node, tuple):
        for item in node:
            yield from _walk(item)
    elif isinstance(node, ast.Node):
        yield node
        for attr in node:
            yield from _walk(getattr(node, attr))


def _transaction(node: Any) -> Described:
    return "TRANSACTION " + node.kind.name.removeprefix("TRANS_STMT_"), [], True


_HANDLERS: dict[type, Any] = {
    ast.AlterTableStmt: _alter_table,
    ast.CreateStmt: _create_table,
    ast.IndexStmt: _index,
    ast.DropStmt: _drop,
    ast.ReindexStmt: _reindex,
    ast.VacuumStmt: _vacuum,
    ast.LockStmt: _lock,
    ast.RefreshMatViewStmt: _refresh,
    ast.RenameStmt: _rename,
    ast.CommentStmt: _comment,
    ast.ClusterStmt: lambda n: ("CLUSTER", [_rv(n.relation, AE)] if n.relation else [], True),
    ast.TruncateStmt: lambda n: ("TRUNCATE", [_rv(r, AE) for r in n.relations], True),
    ast.CreateTrigStmt: lambda n: ("CREATE TRIGGER", [_rv(n.relation, SRE)], True),
    ast.RuleStmt: lambda n: ("CREATE RULE", [_rv(n.relation, AE)], True),
    ast.CreatePolicyStmt: lambda n: ("CREATE POLICY", [_rv(n.table, AE)], True),
    ast.InsertStmt: _dml("INSERT", LockMode.ROW_EXCLUSIVE),
    ast.UpdateStmt: _dml("UPDATE", LockMode.ROW_EXCLUSIVE),
    ast.DeleteStmt: _dml("DELETE", LockMode.ROW_EXCLUSIVE),
    ast.SelectStmt: _select,
    ast.TransactionStmt: _transaction,
    # Since PostgreSQL 12 ADD VALUE may run in a transaction (the value is usable after commit).
    ast.AlterEnumStmt: lambda n: ("ALTER TYPE ... ADD VALUE" if n.newVal and not n.oldVal
                                  else "ALTER TYPE ... RENAME VALUE", [], True),
}
