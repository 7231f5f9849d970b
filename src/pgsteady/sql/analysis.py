"""What each SQL statement locks: statement -> (relations, lock mode), parsed with pglast.

Shared by ``migrate`` (preflight, ``--plan``, naming blockers) and the linter: the one place
pgsteady knows PostgreSQL's locks. It works on text alone, so it names relations as written;
what a statement reaches only through the catalog (a foreign key's other table, partitions
and their parent, a view's base tables, the table behind an index or a statistics object)
is said with a :class:`Reach` on the target, and :mod:`pgsteady.migrate.resolve` follows it
against a live database. Lock levels follow PostgreSQL 13-18's code (``AlterTableGetLockLevel``
and each command's own locking) and are proven against ``pg_locks`` on each of those majors
by the lock-oracle test (``tests/migrate/test_lock_oracle.py``); the few that differ between
majors depend on ``analyze(..., pg_version=)``. A statement gets no targets only when it takes no
relation lock, or when what it locks cannot be known from its text (``DO``, ``CALL``,
``DROP OWNED``: :data:`OPAQUE_KINDS`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

import pglast
from pglast import ast, enums
from pglast.parser import ParseError

from pgsteady import _majors
from pgsteady.sql.locks import _ORDER, LockMode, Reach, Target, join
from pgsteady.sql.reads import calls as _calls
from pgsteady.sql.reads import copy as _copy
from pgsteady.sql.reads import dml as _dml
from pgsteady.sql.reads import names as _names
from pgsteady.sql.reads import reads as _reads
from pgsteady.sql.reads import rv as _rv
from pgsteady.sql.reads import select as _select
from pgsteady.sql.reads import tree as _tree
from pgsteady.sql.reads import writes as _writes
from pgsteady.sql.statement import OPAQUE_KINDS, SqlSyntaxError, StatementInfo, line_col
from pgsteady.sql.statement_kinds import ALTER_TABLE_WORDS as _ALTER_KINDS
from pgsteady.sql.statement_kinds import kind_of, object_words, words
from pgsteady.sql.text import skip_blanks

__all__ = ["OPAQUE_KINDS", "LockMode", "Reach", "SqlSyntaxError", "StatementInfo", "Target",
           "analyze", "join", "line_col"]


def analyze(sql: str, pg_version: int | None = None) -> list[StatementInfo]:
    """Split ``sql`` into statements and say what each one locks.

    ``pg_version``: the server's major, for the few locks that differ between majors
    (:func:`_by_version`); ``None`` predicts what any of them may take.
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
        start = min(skip_blanks(sql, start), end)  # past end: the piece is all blank
        text = sql[start:end].strip().rstrip(";").rstrip()
        line, col = line_col(sql, start)
        kind, targets, transactional = _describe(item.stmt)
        targets = [*targets, *_by_version(item.stmt, pg_version)]
        out.append(StatementInfo(text, line, col, kind, tuple(_merge(targets)), transactional,
                                 item.stmt, tuple(_calls(item.stmt)), tuple(_writes(item.stmt))))
    return out


def _merge(targets: Iterable[Target]) -> Iterator[Target]:
    """One target per relation and reach, with a lock covering every lock asked for it."""
    best: dict[tuple[str | None, str, Reach, str | None], Target] = {}
    for target in targets:
        key = (target.schema, target.name, target.reach, target.only)
        known = best.get(key)
        if known is None:
            best[key] = target
        elif not known.lock.covers(target.lock):
            best[key] = replace(known, lock=join(known.lock, target.lock))
    yield from best.values()


def _by_version(node: Any, pg_version: int | None) -> list[Target]:
    """Locks only some majors take, found by running the lock oracle on 13 to 18 (each a
    weak lock beside the statement's own; ``None``: as the majors that take them)."""
    if isinstance(node, ast.GrantStmt) and _since(pg_version, _majors.GRANT_LOCKS_RELATION) and \
            node.targtype == enums.GrantTargetType.ACL_TARGET_OBJECT and \
            node.objtype in (OT.OBJECT_TABLE, OT.OBJECT_SEQUENCE):
        # 18's GRANT and REVOKE lock each relation they name (not ALL TABLES IN SCHEMA).
        return [_rv(rv, AS) for rv in node.objects or () if isinstance(rv, ast.RangeVar)]
    if isinstance(node, ast.TruncateStmt) and _before(pg_version, _majors.TRUNCATE_SPARES_PARENT):
        # 13's TRUNCATE of a partition also takes ACCESS SHARE on its parent.
        return [_rv(rv, AS, Reach.PARENT) for rv in node.relations or ()]
    return []


def _since(pg_version: int | None, first: int) -> bool:
    return pg_version is None or _majors.supports(pg_version, first)


def _before(pg_version: int | None, first: int) -> bool:
    return pg_version is None or not _majors.supports(pg_version, first)


def _option_names(options: Any) -> set[str]:
    return {str(d.defname) for d in options or () if isinstance(d, ast.DefElem)}


AS = LockMode.ACCESS_SHARE
RS = LockMode.ROW_SHARE
RE = LockMode.ROW_EXCLUSIVE
SUE = LockMode.SHARE_UPDATE_EXCLUSIVE
SH = LockMode.SHARE
SRE = LockMode.SHARE_ROW_EXCLUSIVE
AE = LockMode.ACCESS_EXCLUSIVE
AT = enums.AlterTableType
OT = enums.ObjectType

# ALTER TABLE subcommands that take less than ACCESS EXCLUSIVE (AlterTableGetLockLevel).
_ALTER_LOCKS: dict[Any, LockMode] = {
    AT.AT_SetStatistics: SUE,
    AT.AT_SetOptions: SUE,
    AT.AT_ResetOptions: SUE,
    AT.AT_ClusterOn: SUE,
    AT.AT_DropCluster: SUE,
    AT.AT_ValidateConstraint: SUE,
    AT.AT_AttachPartition: SUE,
    AT.AT_DetachPartitionFinalize: SUE,
    AT.AT_EnableTrig: SRE,
    AT.AT_EnableAlwaysTrig: SRE,
    AT.AT_EnableReplicaTrig: SRE,
    AT.AT_DisableTrig: SRE,
    AT.AT_EnableTrigAll: SRE,
    AT.AT_DisableTrigAll: SRE,
    AT.AT_EnableTrigUser: SRE,
    AT.AT_DisableTrigUser: SRE,
    AT.AT_AddIndex: SH,
}
# Relation options whose change needs ACCESS EXCLUSIVE; every other one takes SHARE UPDATE
# EXCLUSIVE (reloptions.c gives each option its own lock level).
_EXCLUSIVE_RELOPTIONS = frozenset({"user_catalog_table", "fastupdate", "buffering",
                                   "security_barrier", "security_invoker", "check_option",
                                   "recheck_on_update"})
_RELATION_OBJECTS = {OT.OBJECT_TABLE, OT.OBJECT_INDEX, OT.OBJECT_VIEW, OT.OBJECT_MATVIEW,
                     OT.OBJECT_SEQUENCE, OT.OBJECT_FOREIGN_TABLE}
# Objects that live on a table and are named "<table>.<object>" in DROP / COMMENT.
_TABLE_OBJECTS = {OT.OBJECT_TRIGGER, OT.OBJECT_RULE, OT.OBJECT_POLICY, OT.OBJECT_TABCONSTRAINT}
_NOT_IN_TRANSACTION = (ast.CreatedbStmt, ast.DropdbStmt, ast.AlterSystemStmt,
                       ast.CreateTableSpaceStmt, ast.DropTableSpaceStmt,
                       ast.CreateSubscriptionStmt, ast.DropSubscriptionStmt)

Described = tuple[str, list[Target], bool]


def _describe(node: Any) -> Described:
    """(kind, targets, transactional) for one statement node."""
    handler = _HANDLERS.get(type(node))
    if handler is not None:
        described: Described = handler(node)
        return described
    return kind_of(node), [], not isinstance(node, _NOT_IN_TRANSACTION)


def _alter_table(node: Any) -> Described:
    obj = object_words(node.objtype)
    targets: list[Target] = []
    kinds: list[str] = []
    transactional = True
    relation = node.relation
    for cmd in node.cmds or ():
        lock = _alter_lock(cmd)
        kinds.append(_ALTER_KINDS.get(cmd.subtype) or words(cmd.subtype.name.removeprefix("AT_")))
        definition = cmd.def_
        extra: list[Target] = []
        if cmd.subtype == AT.AT_AddConstraint and isinstance(definition, ast.Constraint):
            if definition.contype == enums.ConstrType.CONSTR_FOREIGN:
                # Triggers go on both tables, so both get CREATE TRIGGER's lock.
                kinds[-1] = "ADD FOREIGN KEY"
                extra += _tree(_rv(definition.pktable, SRE), Reach.DESCENDANTS)
            elif definition.contype == enums.ConstrType.CONSTR_CHECK and \
                    definition.skip_validation:
                kinds[-1] = "ADD CHECK NOT VALID"
            extra += _reads(definition.raw_expr)
        elif cmd.subtype == AT.AT_DropConstraint and cmd.name:
            # Dropping a foreign key drops its triggers on the other table too.
            only = f"constraint:{cmd.name}"
            extra += [_rv(relation, AE, Reach.REFERENCED, only),
                      _rv(relation, AE, Reach.REFERENCING, only)]
        elif cmd.subtype in (AT.AT_DropColumn, AT.AT_AlterColumnType) and cmd.name:
            only = f"column:{cmd.name}"
            extra += [_rv(relation, AE, Reach.REFERENCED, only),
                      _rv(relation, AE, Reach.REFERENCING, only)]
            if cmd.behavior == enums.DropBehavior.DROP_CASCADE:
                extra.append(_rv(relation, AE, Reach.DEPENDENT_VIEWS, only))
        elif cmd.subtype in (AT.AT_AddInherit, AT.AT_DropInherit) and \
                isinstance(definition, ast.RangeVar):
            extra.append(_rv(definition, SUE if cmd.subtype == AT.AT_AddInherit else AS))
        if isinstance(definition, ast.PartitionCmd):
            if cmd.subtype == AT.AT_DetachPartition and definition.concurrent:
                lock, transactional = SUE, False
                kinds[-1] = "DETACH PARTITION CONCURRENTLY"
            partition_lock = SUE if cmd.subtype == AT.AT_DetachPartitionFinalize else AE
            if lock == SUE and cmd.subtype == AT.AT_DetachPartition:
                partition_lock = SUE
            extra += _tree(_rv(definition.name, partition_lock), Reach.DESCENDANTS)
            extra.append(_rv(relation, AE, Reach.DEFAULT_PARTITION))
            if node.objtype == OT.OBJECT_INDEX:  # ALTER INDEX ... ATTACH PARTITION
                extra += [_rv(relation, AS, Reach.INDEX_TABLE),
                          _rv(definition.name, AS, Reach.INDEX_TABLE)]
        if isinstance(definition, ast.ColumnDef):
            extra += _column_references(definition)
            extra += _reads(definition.raw_default)
        # Most subcommands recurse to partitions and inheritance children (not with ONLY).
        recurse = relation.inh and cmd.subtype not in (
            AT.AT_AttachPartition, AT.AT_DetachPartition, AT.AT_DetachPartitionFinalize)
        targets += _tree(_rv(relation, lock), *((Reach.DESCENDANTS,) if recurse else ()))
        targets += extra
    kind = f"ALTER {obj} ... " + ", ".join(dict.fromkeys(kinds)) if kinds else f"ALTER {obj}"
    return kind, targets, transactional


def _alter_lock(cmd: Any) -> LockMode:
    if cmd.subtype in (AT.AT_SetRelOptions, AT.AT_ResetRelOptions):
        names = {str(d.defname) for d in cmd.def_ or () if isinstance(d, ast.DefElem)}
        return AE if names & _EXCLUSIVE_RELOPTIONS else SUE
    if cmd.subtype == AT.AT_AddConstraint and isinstance(cmd.def_, ast.Constraint) and \
            cmd.def_.contype == enums.ConstrType.CONSTR_FOREIGN:
        return SRE
    return _ALTER_LOCKS.get(cmd.subtype, AE)


def _column_references(column: Any) -> list[Target]:
    return [target for c in column.constraints or ()
            if isinstance(c, ast.Constraint) and c.contype == enums.ConstrType.CONSTR_FOREIGN
            for target in _tree(_rv(c.pktable, SRE), Reach.DESCENDANTS)]


def _create_table(node: Any) -> Described:
    targets: list[Target] = []
    for element in node.tableElts or ():
        if isinstance(element, ast.ColumnDef):
            targets += _column_references(element)
        elif isinstance(element, ast.Constraint) and \
                element.contype == enums.ConstrType.CONSTR_FOREIGN:
            targets += _tree(_rv(element.pktable, SRE), Reach.DESCENDANTS)
        elif isinstance(element, ast.TableLikeClause):
            targets.append(_rv(element.relation, AS))
    if node.partbound is not None:
        # A new partition changes its parent's partition descriptor (and the default
        # partition's implicit constraint): both are locked exclusively.
        for parent in node.inhRelations or ():
            targets += _tree(_rv(parent, AE), Reach.DEFAULT_PARTITION)
        return "CREATE TABLE ... PARTITION OF", targets, True
    targets += [_rv(parent, SUE) for parent in node.inhRelations or ()]
    return "CREATE TABLE", targets, True


def _create_table_as(node: Any) -> Described:
    kind = "CREATE MATERIALIZED VIEW" if node.objtype == OT.OBJECT_MATVIEW else \
        "CREATE TABLE AS"
    return kind, _reads(node.query), True


def _view(node: Any) -> Described:
    # OR REPLACE takes ACCESS EXCLUSIVE on the view it replaces; a new view locks nothing.
    kind = "CREATE OR REPLACE VIEW" if node.replace else "CREATE VIEW"
    replaced = [_rv(node.view, AE)] if node.replace else []
    # The definition is only parsed: what it names is locked, not what views expand to.
    return kind, [*replaced, *_reads(node.query, expand=False)], True


def _index(node: Any) -> Described:
    reaches = (Reach.DESCENDANTS,) if node.relation.inh else ()
    if node.concurrent:
        return "CREATE INDEX CONCURRENTLY", _tree(_rv(node.relation, SUE), *reaches), False
    return "CREATE INDEX", _tree(_rv(node.relation, SH), *reaches) + \
        _reads(node.whereClause), True


def _drop(node: Any) -> Described:
    what = object_words(node.removeType)
    kind = f"DROP {what}"
    if node.removeType in _RELATION_OBJECTS:
        lock = SUE if node.concurrent else AE
        targets = []
        cascade = (Reach.DEPENDENT_VIEWS,) if node.behavior == enums.DropBehavior.DROP_CASCADE \
            else ()
        for obj in node.objects:
            # A table's partitions and children go with it; a partition's parent (and the
            # default partition beside it) is locked; its foreign keys' triggers on the other
            # tables are dropped; CASCADE drops the views on it.
            targets += _tree(_names(obj, lock), Reach.INDEX_TABLE, Reach.DESCENDANTS,
                             Reach.PARENT, Reach.SIBLING_DEFAULT, Reach.REFERENCED,
                             Reach.REFERENCING, *cascade)
        if node.concurrent:
            return kind + " CONCURRENTLY", targets, False
        return kind, targets, True
    if node.removeType in _TABLE_OBJECTS:
        # DROP TRIGGER t ON tbl: objects are (schema?, table, trigger).
        targets = []
        for obj in node.objects:
            table = _names(obj[:-1], AE)
            targets += _tree(table, Reach.DESCENDANTS)
        return kind, targets, True
    if node.removeType == OT.OBJECT_STATISTIC_EXT:
        return kind, [_names(o, SUE, Reach.STATISTICS) for o in node.objects], True
    if node.removeType in (OT.OBJECT_FUNCTION, OT.OBJECT_PROCEDURE, OT.OBJECT_ROUTINE) and \
            node.behavior == enums.DropBehavior.DROP_CASCADE:
        # CASCADE drops the triggers calling it: ACCESS EXCLUSIVE on their tables.
        return kind, [_names(o.objname, AE, Reach.FUNCTION_USERS) for o in node.objects], True
    if node.removeType == OT.OBJECT_SCHEMA:
        cascade = node.behavior == enums.DropBehavior.DROP_CASCADE
        targets = [Target(None, o.sval, AE, Reach.SCHEMA) for o in node.objects] \
            if cascade else []
        return kind, targets, True
    return kind, [], True


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
    targets = _tree(_rv(node.relation, lock), Reach.DESCENDANTS)
    if what == "INDEX":
        targets.append(_rv(node.relation, SUE if concurrently else SH, Reach.INDEX_TABLE))
    return kind, targets, not concurrently


def _vacuum(node: Any) -> Described:
    options = _option_names(node.options)
    rels = [v.relation for v in node.rels or () if v.relation is not None]
    if not node.is_vacuumcmd:
        return "ANALYZE", [t for r in rels for t in _tree(_rv(r, SUE), Reach.DESCENDANTS)], True
    lock, kind = (AE, "VACUUM FULL") if "full" in options else (SUE, "VACUUM")
    return kind, [t for r in rels for t in _tree(_rv(r, lock), Reach.DESCENDANTS)], False


def _lock(node: Any) -> Described:
    mode = _ORDER[int(node.mode) - 1]
    targets: list[Target] = []
    for rv in node.relations:
        # LOCK on a view locks what it reads, in the same mode (PostgreSQL 11+).
        reaches = (Reach.READS, Reach.DESCENDANTS) if rv.inh else (Reach.READS,)
        targets += _tree(_rv(rv, mode), *reaches)
    return f"LOCK TABLE IN {mode} MODE", targets, True


def _refresh(node: Any) -> Described:
    reads = [_rv(node.relation, AS, Reach.READS)]
    if node.concurrent:
        return "REFRESH MATERIALIZED VIEW CONCURRENTLY", [
            _rv(node.relation, LockMode.EXCLUSIVE), *reads], True
    return "REFRESH MATERIALIZED VIEW", [_rv(node.relation, AE), *reads], True


def _rename(node: Any) -> Described:
    what = object_words(node.renameType)
    if node.relation is None:
        if node.renameType == OT.OBJECT_STATISTIC_EXT:
            return "ALTER STATISTICS ... RENAME", [_names(node.object, SUE, Reach.STATISTICS)], \
                True
        return f"ALTER {what} ... RENAME", [], True
    # Renaming an index takes only SHARE UPDATE EXCLUSIVE since PostgreSQL 12.
    lock = SUE if node.renameType == OT.OBJECT_INDEX else AE
    target = _rv(node.relation, lock)
    if node.renameType in (OT.OBJECT_COLUMN, OT.OBJECT_TABCONSTRAINT, OT.OBJECT_TRIGGER) and \
            node.relation.inh:
        return f"ALTER TABLE ... RENAME {what}", _tree(target, Reach.DESCENDANTS), True
    if node.renameType in (OT.OBJECT_COLUMN, OT.OBJECT_TABCONSTRAINT, OT.OBJECT_TRIGGER,
                           OT.OBJECT_POLICY, OT.OBJECT_RULE):
        return f"ALTER TABLE ... RENAME {what}", [target], True
    return f"ALTER {what} ... RENAME", [target], True


def _set_schema(node: Any) -> Described:
    what = object_words(node.objectType)
    if node.relation is not None:
        return f"ALTER {what} ... SET SCHEMA", [_rv(node.relation, AE)], True
    return f"ALTER {what} ... SET SCHEMA", [], True


def _comment(node: Any) -> Described:
    # COMMENT ON takes SHARE UPDATE EXCLUSIVE on the relation it is about (or carries it).
    what = object_words(node.objtype)
    kind = f"COMMENT ON {what}"
    if node.objtype in _RELATION_OBJECTS and isinstance(node.object, tuple):
        return kind, [_names(node.object, SUE)], True
    if node.objtype == OT.OBJECT_COLUMN and isinstance(node.object, tuple):
        return kind, [_names(node.object[:-1], SUE)], True
    if node.objtype in _TABLE_OBJECTS and isinstance(node.object, tuple):
        return kind, [_names(node.object[:-1], AS)], True  # the table only carries it
    return kind, [], True


def _transaction(node: Any) -> Described:
    return "TRANSACTION " + node.kind.name.removeprefix("TRANS_STMT_"), [], True


def _truncate(node: Any) -> Described:
    cascade = node.behavior == enums.DropBehavior.DROP_CASCADE
    targets: list[Target] = []
    for rv in node.relations:
        reaches = [Reach.DESCENDANTS] if rv.inh else []
        if cascade:
            reaches.append(Reach.REFERENCING)
        targets += _tree(_rv(rv, AE), *reaches)
    return "TRUNCATE", targets, True


def _create_trigger(node: Any) -> Described:
    targets = _tree(_rv(node.relation, SRE), Reach.DESCENDANTS)
    if node.constrrel is not None:
        targets.append(_rv(node.constrrel, AS))
    kind = "CREATE CONSTRAINT TRIGGER" if node.isconstraint else "CREATE TRIGGER"
    return kind, targets, True


def _rule(node: Any) -> Described:
    # The actions are parsed when the rule is made: they lock what they would write, too.
    actions = [t for action in node.actions or () for t in _describe(action)[1]]
    return "CREATE RULE", [_rv(node.relation, AE), *actions, *_reads(node.whereClause)], True


def _policy(kind: str) -> Any:
    def describe(node: Any) -> Described:
        return kind, [_rv(node.table, AE), *_reads(node.qual), *_reads(node.with_check)], True
    return describe


def _explain(node: Any) -> Described:
    kind, targets, transactional = _describe(node.query)
    return f"EXPLAIN {kind}", targets, transactional


def _sequence(node: Any) -> Described:
    targets: list[Target] = []
    for option in node.options or ():
        if isinstance(option, ast.DefElem) and option.defname == "owned_by" and \
                isinstance(option.arg, tuple) and len(option.arg) > 1:
            targets.append(_names(option.arg[:-1], AS))
    if isinstance(node, ast.AlterSeqStmt):
        return "ALTER SEQUENCE", [_rv(node.sequence, SRE), *targets], True
    return "CREATE SEQUENCE", targets, True


def _statistics(node: Any) -> Described:
    if isinstance(node, ast.AlterStatsStmt):
        return "ALTER STATISTICS", [], True  # the statistics object only, not its table
    targets = [_rv(r, SUE) for r in node.relations or () if isinstance(r, ast.RangeVar)]
    return "CREATE STATISTICS", targets, True


def _function(node: Any) -> Described:
    """SQL-language bodies are parsed when created (check_function_bodies): they read."""
    kind = "CREATE PROCEDURE" if node.is_procedure else "CREATE FUNCTION"
    options = {str(d.defname): d.arg for d in node.options or () if isinstance(d, ast.DefElem)}
    language = getattr(options.get("language"), "sval", "")
    targets: list[Target] = []
    if node.sql_body is not None:
        targets = _reads(node.sql_body)
    elif language == "sql" and isinstance(source := options.get("as"), tuple):
        try:
            body = pglast.parse_sql(source[0].sval)
        except ParseError:
            body = ()
        targets = [t for raw in body for t in _describe(raw.stmt)[1]]
    return kind, targets, True


def _domain(node: Any) -> Described:
    # Adding a constraint (or NOT NULL) checks every column of the domain: SHARE on tables.
    if node.subtype in ("C", "O"):
        return "ALTER DOMAIN ... ADD CONSTRAINT" if node.subtype == "C" else \
            "ALTER DOMAIN ... SET NOT NULL", [_names(node.typeName, SH, Reach.DOMAIN_USERS)], \
            True
    if node.subtype == "V":
        return "ALTER DOMAIN ... VALIDATE CONSTRAINT", [
            _names(node.typeName, SH, Reach.DOMAIN_USERS)], True
    return "ALTER DOMAIN", [], True


def _publication(node: Any) -> Described:
    kind = "CREATE PUBLICATION" if isinstance(node, ast.CreatePublicationStmt) else \
        "ALTER PUBLICATION"
    targets = [_rv(o.pubtable.relation, SUE) for o in node.pubobjects or ()
               if getattr(o, "pubtable", None) is not None]
    return kind, targets, True


def _security_label(node: Any) -> Described:
    # Like COMMENT ON: SHARE UPDATE EXCLUSIVE on the relation labelled (or its table).
    kind = _comment(node)[0].replace("COMMENT ON", "SECURITY LABEL ON")
    return kind, _comment(node)[1], True


def _query_of(kind: str) -> Any:
    """DECLARE / PREPARE: the query is analysed (and its relations locked) right away."""
    def describe(node: Any) -> Described:
        return kind, _describe(node.query)[1], True
    return describe


def _create_schema(node: Any) -> Described:
    targets = [t for element in node.schemaElts or () for t in _describe(element)[1]]
    return "CREATE SCHEMA", targets, True


def _foreign_table(node: Any) -> Described:
    return "CREATE FOREIGN TABLE", _create_table(node.base)[1], True


def _grant(node: Any) -> Described:
    return ("GRANT" if node.is_grant else "REVOKE"), [], True


_HANDLERS: dict[type, Any] = {
    ast.AlterTableStmt: _alter_table,
    ast.CreateStmt: _create_table,
    ast.CreateTableAsStmt: _create_table_as,
    ast.ViewStmt: _view,
    ast.IndexStmt: _index,
    ast.DropStmt: _drop,
    ast.ReindexStmt: _reindex,
    ast.VacuumStmt: _vacuum,
    ast.LockStmt: _lock,
    ast.RefreshMatViewStmt: _refresh,
    ast.RenameStmt: _rename,
    ast.AlterObjectSchemaStmt: _set_schema,
    ast.CommentStmt: _comment,
    ast.ClusterStmt: lambda n: ("CLUSTER", [_rv(n.relation, AE)] if n.relation else [],
                                n.relation is not None),
    ast.TruncateStmt: _truncate,
    ast.CreateTrigStmt: _create_trigger,
    ast.RuleStmt: _rule,
    ast.CreatePolicyStmt: _policy("CREATE POLICY"),
    ast.AlterPolicyStmt: _policy("ALTER POLICY"),
    ast.InsertStmt: _dml("INSERT"),
    ast.UpdateStmt: _dml("UPDATE"),
    ast.DeleteStmt: _dml("DELETE"),
    ast.MergeStmt: _dml("MERGE"),
    ast.SelectStmt: _select,
    ast.CopyStmt: _copy,
    ast.ExplainStmt: _explain,
    ast.CreateSeqStmt: _sequence,
    ast.AlterSeqStmt: _sequence,
    ast.CreateStatsStmt: _statistics,
    ast.AlterStatsStmt: _statistics,
    ast.CreateFunctionStmt: _function,
    ast.AlterDomainStmt: _domain,
    ast.CreatePublicationStmt: _publication,
    ast.AlterPublicationStmt: _publication,
    ast.GrantStmt: _grant,
    ast.SecLabelStmt: _security_label,
    ast.DeclareCursorStmt: _query_of("DECLARE CURSOR"),
    ast.PrepareStmt: _query_of("PREPARE"),
    ast.CreateSchemaStmt: _create_schema,
    ast.CreateForeignTableStmt: _foreign_table,
    ast.AlterObjectDependsStmt: lambda n: (
        f"ALTER {object_words(n.objectType)} ... DEPENDS ON EXTENSION",
        [_rv(n.relation, AE)] if n.relation is not None else [], True),
    ast.TransactionStmt: _transaction,
    # Since PostgreSQL 12 ADD VALUE may run in a transaction (the value is usable after commit).
    ast.AlterEnumStmt: lambda n: ("ALTER TYPE ... ADD VALUE" if n.newVal and not n.oldVal
                                  else "ALTER TYPE ... RENAME VALUE", [], True),
}
