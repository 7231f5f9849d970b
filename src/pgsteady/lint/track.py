"""What the engine learns from each statement, for the rules that look at later ones.

Transactions opened and closed, timeouts set, tables created, NOT NULL checks added and
validated, foreign keys added, tables emptied, views dropped: after a statement is checked,
:func:`track` records it in the file's :class:`~pgsteady.lint.base.Context` (and
:func:`forget_emptied` after a statement the engine did not decode).
"""

from __future__ import annotations

from collections.abc import Sequence

from pgsteady.lint.base import Context, Node, existing_foreign_key_targets

#: Statement types :func:`track` learns from (the engine decodes these even if no rule asks).
TRACKED = frozenset({"TransactionStmt", "VariableSetStmt", "CreateStmt", "AlterTableStmt",
                     "TruncateStmt", "DeleteStmt", "DropStmt", "RenameStmt"})
# ALTER TABLE ... RENAME of these takes ACCESS EXCLUSIVE (an index's rename does not).
_RENAMED_EXCLUSIVE = frozenset({"OBJECT_TABLE", "OBJECT_COLUMN", "OBJECT_TABCONSTRAINT"})

# Statements that cannot put rows back into a table the transaction emptied; any other (an
# INSERT, COPY, MERGE, a DO block, a function call) may, and ends what lint knows.
_KEEPS_EMPTY = frozenset({
    "TransactionStmt", "VariableSetStmt", "AlterTableStmt", "TruncateStmt", "DeleteStmt",
    "UpdateStmt", "IndexStmt", "DropStmt", "CreateStmt", "CommentStmt", "GrantStmt",
    "GrantRoleStmt", "RenameStmt", "CreateSeqStmt", "AlterSeqStmt", "CreateEnumStmt",
    "AlterEnumStmt", "CompositeTypeStmt", "CreateDomainStmt", "LockStmt", "ViewStmt",
    "AlterOwnerStmt", "AlterObjectSchemaStmt", "CreateSchemaStmt", "CreateFunctionStmt",
    "CreateTrigStmt", "DefineStmt", "AlterDefaultPrivilegesStmt", "ConstraintsSetStmt"})


def forget_emptied(kind: str, ctx: Context) -> None:
    """Tables emptied earlier may hold rows again after a statement that can insert them."""
    if ctx.emptied_in_transaction and kind not in _KEEPS_EMPTY:
        ctx.emptied_in_transaction.clear()


def note_after_commit(statement_kind: str, start: int, ctx: Context) -> None:
    """Remember where the first statement after a committed block starts (every statement,
    parsed or not, comes here)."""
    if ctx.block_committed and ctx.after_commit_at is None and \
            statement_kind != "TransactionStmt":
        ctx.after_commit_at = start


def track(kind: str, stmt: Node, ctx: Context, begin: int) -> None:
    """Update what the context knows after a statement (transactions, timeouts, tables)."""
    forget_emptied(kind, ctx)
    if kind == "TransactionStmt":
        what = stmt.get("kind", "")
        if what in ("TRANS_STMT_BEGIN", "TRANS_STMT_START"):
            ctx.transaction_depth += 1
            if ctx.transaction_depth == 1:
                ctx.open_transaction_at = begin
        elif what in ("TRANS_STMT_COMMIT", "TRANS_STMT_ROLLBACK", "TRANS_STMT_PREPARE"):
            if ctx.transaction_depth == 1 and what == "TRANS_STMT_COMMIT":
                ctx.block_committed = True
            ctx.transaction_depth = max(0, ctx.transaction_depth - 1)
            if ctx.transaction_depth == 0:
                ctx.open_transaction_at = None
                ctx.not_valid_in_transaction.clear()
                ctx.fk_targets_in_transaction.clear()
                ctx.altered_in_transaction.clear()
                ctx.emptied_in_transaction.clear()
    elif kind == "VariableSetStmt":
        name = str(stmt.get("name", "")).lower()
        # SET x TO DEFAULT and RESET x fall back to the server's setting: assume none.
        disabled = stmt.get("kind") != "VAR_SET_VALUE" or _is_zero(stmt.get("args"))
        if name == "lock_timeout":
            ctx.lock_timeout_set = not disabled
        elif name == "statement_timeout":
            ctx.statement_timeout_set = not disabled
    elif kind == "CreateStmt":
        if ctx.in_transaction:
            ctx.fk_targets_in_transaction.update(existing_foreign_key_targets(kind, stmt, ctx))
    elif kind == "AlterTableStmt":
        _track_checks(stmt, ctx)
        relation = stmt.get("relation") or {}
        if ctx.in_transaction and stmt.get("objtype") == "OBJECT_TABLE" and \
                not ctx.is_new_table(relation) and _takes_access_exclusive(stmt):
            ctx.altered_in_transaction.add(ctx.key(relation))
        if ctx.in_transaction:
            ctx.fk_targets_in_transaction.update(existing_foreign_key_targets(kind, stmt, ctx))
    elif kind in ("TruncateStmt", "DeleteStmt"):
        _track_emptied(kind, stmt, ctx)
    elif kind == "RenameStmt" and stmt.get("renameType") in _RENAMED_EXCLUSIVE:
        relation = stmt.get("relation") or {}
        if ctx.in_transaction and relation and not ctx.is_new_table(relation):
            schema, name = ctx.key(relation)
            renamed = stmt.get("renameType") == "OBJECT_TABLE" and stmt.get("newname")
            ctx.altered_in_transaction.add((schema, str(renamed)) if renamed else (schema, name))
    elif kind == "DropStmt" and stmt.get("removeType") == "OBJECT_VIEW":
        for obj in stmt.get("objects") or ():
            names = [n["String"]["sval"] for n in obj.get("List", {}).get("items") or ()
                     if "String" in n]
            if names:
                ctx.dropped_views.add(ctx.schema.name_key(names, ctx.schema.views))


def _track_emptied(kind: str, stmt: Node, ctx: Context) -> None:
    """Remember the tables a TRUNCATE, or a DELETE of every row, empties in the transaction.

    Only inside a transaction the file or its runner holds open: run statement by statement,
    the application may insert rows again before the next one. ``ONLY`` leaves the rows of
    child tables (which an ADD COLUMN on the parent reaches too).
    """
    if not (ctx.transaction_depth > 0 or ctx.assume_in_transaction):
        return
    if kind == "TruncateStmt":
        relations = [item.get("RangeVar") or {} for item in stmt.get("relations") or ()]
    elif not any(stmt.get(part) for part in ("whereClause", "usingClause", "withClause")):
        relations = [stmt.get("relation") or {}]
    else:
        return
    ctx.emptied_in_transaction.update(ctx.key(r) for r in relations if r and r.get("inh"))


def _is_zero(args: Sequence[Node] | None) -> bool:
    for arg in args or ():
        const = arg.get("A_Const", {})
        if "ival" in const:
            return int(const["ival"].get("ival", 0)) == 0
        if "sval" in const:
            return str(const["sval"].get("sval", "")).strip() in {"0", "0ms", "0s"}
    return False


def _track_checks(stmt: Node, ctx: Context) -> None:
    """Remember CHECK (col IS NOT NULL) constraints, so SET NOT NULL can tell it is cheap."""
    table = ctx.key(stmt.get("relation") or {})
    for item in stmt.get("cmds") or ():
        cmd = item.get("AlterTableCmd", {})
        subtype = cmd.get("subtype")
        if subtype == "AT_AddConstraint":
            constraint = (cmd.get("def") or {}).get("Constraint", {})
            if constraint.get("skip_validation") and ctx.in_transaction:
                ctx.not_valid_in_transaction.add(str(constraint.get("conname", "")))
            column = _not_null_check_column(constraint)
            if column is None:
                continue
            if constraint.get("skip_validation"):
                ctx.pending_not_null_checks[str(constraint.get("conname", ""))] = (table, column)
            else:
                ctx.proven_not_null.add((table, column))
        elif subtype == "AT_ValidateConstraint":
            name = str(cmd.get("name", ""))
            pending = ctx.pending_not_null_checks.pop(name, None)
            if pending is not None:
                ctx.proven_not_null.add(pending)
            elif name not in ctx.not_valid_in_transaction:
                ctx.validated_elsewhere.add(table)


def _not_null_check_column(constraint: Node) -> str | None:
    """``CHECK (col IS NOT NULL)`` -> ``col``; anything else -> None."""
    if constraint.get("contype") != "CONSTR_CHECK":
        return None
    test = (constraint.get("raw_expr") or {}).get("NullTest")
    if not test or test.get("nulltesttype") != "IS_NOT_NULL":
        return None
    fields = (test.get("arg") or {}).get("ColumnRef", {}).get("fields") or ()
    names = [f["String"]["sval"] for f in fields if "String" in f]
    return names[-1].lower() if names else None


# ALTER TABLE subcommands that take less than ACCESS EXCLUSIVE (manual, "ALTER TABLE").
_WEAKER = frozenset({
    "AT_SetStatistics", "AT_ClusterOn", "AT_DropCluster", "AT_SetRelOptions",
    "AT_ResetRelOptions", "AT_ValidateConstraint", "AT_AttachPartition",
    "AT_EnableTrig", "AT_DisableTrig", "AT_EnableAlwaysTrig", "AT_EnableReplicaTrig",
    "AT_EnableTrigAll", "AT_DisableTrigAll", "AT_EnableTrigUser", "AT_DisableTrigUser",
})


def _takes_access_exclusive(stmt: Node) -> bool:
    """True if some subcommand needs ACCESS EXCLUSIVE (ADD CONSTRAINT counted weaker: a
    foreign key takes SHARE ROW EXCLUSIVE; CHECK and UNIQUE are flagged by their own rules)."""
    return any(not _weaker(item.get("AlterTableCmd", {})) for item in stmt.get("cmds") or ())


def _weaker(cmd: Node) -> bool:
    if cmd.get("subtype") == "AT_AddConstraint":  # only a foreign key: SHARE ROW EXCLUSIVE
        constraint = (cmd.get("def") or {}).get("Constraint", {})
        return bool(constraint.get("contype") == "CONSTR_FOREIGN")
    return cmd.get("subtype") in _WEAKER
