"""What rules and the engine share: the parse tree's shape, a rule's hits, the per-file context.

The tree is pglast's JSON form (``parse_sql_json`` + ``json.loads``), not its Python AST: the
same information for about a tenth of the cost, which is what lets a linter written in Python
keep pace with squawk. A node is ``{"TypeName": {fields}}`` where a field can hold any node,
and a plain ``{fields}`` dict where the type is fixed (``relation`` is always a RangeVar).
Fields at their default (false, 0, empty) are absent, so always read them with ``.get``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from pgsteady import _majors
from pgsteady._record import Record
from pgsteady.lint.schema import Key, Schema

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any, Final, Literal

    Node = dict[str, Any]
else:
    Node = dict

#: The PostgreSQL major version rules assume when nothing says otherwise.
DEFAULT_PG_VERSION = _majors.LINT_DEFAULT


class Hit(Record):
    """One problem a rule found in a statement.

    ``location`` is a node's ``location`` (the engine maps it to the file); ``None`` means the
    statement's first word, or, given ``command`` (an ALTER TABLE subcommand, which has no
    location of its own), that subcommand's first word. ``table`` names the relation whose
    size makes it worse. ``severity`` overrides the rule's (a "may rewrite" when the old type
    is unknown).
    """

    __slots__ = ("command", "detail", "location", "severity", "table")
    _UNCOMPARED = ("command",)

    def __init__(self, detail: str = "", location: int | None = None,
                 table: tuple[str | None, str] | None = None,
                 severity: Literal["error", "warning"] | None = None,
                 command: Node | None = None) -> None:
        self.detail: Final = detail
        self.location: Final = location
        self.table: Final = table
        self.severity: Final = severity
        self.command: Final = command


class Context:
    """What the engine knows about the file so far, before the current statement."""

    __slots__ = ("after_commit_at", "altered_in_transaction", "assume_in_transaction",
                 "assume_runner_timeouts", "block_committed", "dropped_views",
                 "emptied_in_transaction", "fk_targets_in_transaction",
                 "implicit_transaction", "in_do_block",
                 "lock_timeout_set", "new_columns_with_default",
                 "not_valid_in_transaction", "open_transaction_at", "pending_not_null_checks",
                 "pg_version", "proven_not_null", "relation", "reported", "schema", "source",
                 "statement_timeout_set", "transaction_depth", "validated_elsewhere")

    def __init__(self, pg_version: int = DEFAULT_PG_VERSION, *,
                 assume_runner_timeouts: bool = True, assume_in_transaction: bool = True,
                 schema: Schema | None = None, source: bytes = b"") -> None:
        self.pg_version = pg_version
        self.assume_runner_timeouts = assume_runner_timeouts
        self.assume_in_transaction = assume_in_transaction
        self.transaction_depth = 0
        # True when the runner sends the file as one multi-statement query (Prisma,
        # golang-migrate): its transaction is PostgreSQL's implicit one, which a BEGIN turns
        # into an explicit block (no nesting, no warning) and a COMMIT ends early.
        self.implicit_transaction = False
        self.lock_timeout_set = False
        self.statement_timeout_set = False
        # The schema replayed so far: tables (new ones too), columns and their types, views.
        self.schema = Schema() if schema is None else schema
        # True while the statements of a DO block are checked: one statement, one transaction.
        self.in_do_block = False
        # CHECK constraints added NOT VALID, by name -> (table, column they prove NOT NULL).
        self.pending_not_null_checks: dict[str, tuple[Key, str]] = {}
        # Constraints added NOT VALID in the transaction still open (validating them there
        # keeps the ADD's ACCESS EXCLUSIVE lock for the whole scan).
        self.not_valid_in_transaction: set[str] = set()
        # Existing tables the open transaction holds ACCESS EXCLUSIVE on (by an ALTER TABLE).
        self.altered_in_transaction: set[Key] = set()
        # Existing tables the open transaction's foreign keys reference (SHARE ROW EXCLUSIVE).
        self.fk_targets_in_transaction: set[Key] = set()
        # Existing tables the open transaction emptied (TRUNCATE, DELETE without WHERE) and
        # nothing has written to since: a NOT NULL column added to them has no row to fail on.
        self.emptied_in_transaction: set[Key] = set()
        # Views this file dropped: a CREATE OR REPLACE of one of them creates a new view.
        self.dropped_views: set[Key] = set()
        # (table, column) of NOT NULL columns this file added to existing tables with a DEFAULT.
        self.new_columns_with_default: set[tuple[Key, str]] = set()
        # (table, column) pairs a validated CHECK (column IS NOT NULL) already covers.
        self.proven_not_null: set[tuple[Key, str]] = set()
        # Tables with a VALIDATE CONSTRAINT of a constraint added in an earlier migration: it
        # is most likely the CHECK (col IS NOT NULL) a following SET NOT NULL relies on.
        self.validated_elsewhere: set[Key] = set()
        # Byte offset of the BEGIN that opened the current explicit transaction.
        self.open_transaction_at: int | None = None
        # An explicit block was committed; the first statement after it starts (byte offset):
        # in a file sent as one query, that statement runs in a new implicit transaction.
        self.block_committed = False
        self.after_commit_at: int | None = None
        # The file's text as the parser's offsets count (UTF-8): where ALTER subcommands start.
        self.source = source
        # Once-per-file rules remember here that they have spoken.
        self.reported: set[str] = set()
        # The table of the ALTER TABLE whose subcommands a command rule is being handed.
        self.relation: Node = {}

    @property
    def in_transaction(self) -> bool:
        return self.assume_in_transaction or self.transaction_depth > 0 or self.in_do_block

    def is_new_table(self, relation: Node | None) -> bool:
        """True if ``relation`` (a RangeVar) was created in the change being checked."""
        return self.schema.is_new(relation)

    def key(self, relation: Node) -> Key:
        """A RangeVar as (schema, name), resolved on the search_path the file set."""
        return self.schema.key(relation)


Check = Callable[[str, Node, Context], Iterable[Hit]]
Finish = Callable[[Context], Iterable[Hit]]


def per_command(check: Check, commands: tuple[str, ...], *, new_tables: bool) -> Check:
    """A statement check from a command rule's ``check(subtype, cmd, ctx)``: called once for
    each ALTER TABLE subcommand of a kind in ``commands``, with ``ctx.relation`` the table,
    and (unless ``new_tables``) only when the table existed before this change."""
    wanted = frozenset(commands)

    def check_statement(kind: str, stmt: Node, ctx: Context) -> Iterator[Hit]:
        relation = stmt.get("relation") or {}
        if not new_tables and ctx.is_new_table(relation):
            return
        for subtype, cmd in alter_commands(stmt):
            if subtype in wanted:
                ctx.relation = relation
                yield from check(subtype, cmd, ctx)

    return check_statement


class Rule:
    """A rule module, checked for completeness and flattened into one typed record.

    Compared by identity: there is one record per rule, and the engine looks rules up often.
    """

    __slots__ = ("check", "default_enabled", "doc", "feature", "finish", "help", "help_before",
                 "id", "message", "min_pg_version", "module", "severity", "size_aware",
                 "statements")

    def __init__(self, *, id: str, message: str, help: str,
                 min_pg_version: int | None, doc: str, statements: tuple[str, ...],
                 check: Check, finish: Finish | None, size_aware: bool,
                 default_enabled: bool, module: str,
                 severity: Literal["error", "warning"] = "error",
                 feature: int | None = None, help_before: str = "") -> None:
        self.id: Final = id
        self.message: Final = message
        self.help: Final = help
        self.min_pg_version: Final = min_pg_version
        self.doc: Final = doc
        self.statements: Final = statements
        self.check: Final = check
        self.finish: Final = finish
        self.size_aware: Final = size_aware
        self.default_enabled: Final = default_enabled
        self.module: Final = module
        self.severity: Final = severity
        # The first major of the feature ``help`` relies on; before it, ``help_before`` is
        # the fix (the lock is the same: a version gate changes the advice, never the verdict).
        self.feature: Final = feature
        self.help_before: Final = help_before

    def help_for(self, major: int) -> str:
        """What to do instead, on PostgreSQL ``major``."""
        if self.feature is None or _majors.supports(major, self.feature):
            return self.help
        return self.help_before

    def __repr__(self) -> str:
        return f"Rule(id={self.id!r})"


def unwrap(node: Node) -> tuple[str, Node]:
    """``{"IndexStmt": {...}}`` -> ``("IndexStmt", {...})``."""
    for name, body in node.items():
        return name, body
    return "", {}


def strings(items: Iterable[Node] | None) -> list[str]:
    """The text of a list of ``String`` nodes (qualified names, column lists)."""
    return [item["String"]["sval"] for item in items or () if "String" in item]


def type_name(type_node: Node | None) -> str:
    """A TypeName's last part: ``pg_catalog.int4`` -> ``int4``, ``serial`` -> ``serial``.

    Kept in the node: several rules ask for every column type they look at."""
    if not type_node:
        return ""
    found: str | None = type_node.get(_TYPE_NAME)
    if found is None:
        names = strings(type_node.get("names"))
        found = type_node[_TYPE_NAME] = names[-1].lower() if names else ""
    return found


def qualified(relation: Node) -> str:
    """A RangeVar as written: ``schema.name`` or ``name``."""
    schema = relation.get("schemaname")
    return f"{schema}.{relation['relname']}" if schema else str(relation["relname"])


def table_ref(relation: Node | None) -> tuple[str | None, str] | None:
    """(schema, name) of a RangeVar, for the size lookup."""
    if not relation:
        return None
    return relation.get("schemaname"), str(relation["relname"])


# Helpers that several rules call on the same statement keep their answer in the statement's
# dict, under a key no parser field has, as a tuple (``walk`` does not descend into tuples).
_CMDS = "\x00cmds"
_COLUMNS = "\x00columns"
_FK = "\x00fk"
_TYPED = "\x00typed"
_TYPE_NAME = "\x00type"  # in a TypeName: a string, which ``walk`` does not descend into either


def alter_commands(stmt: Node) -> tuple[tuple[str, Node], ...]:
    """Each ALTER TABLE subcommand as (subtype, command); ALTER INDEX etc. are skipped."""
    found: tuple[tuple[str, Node], ...] | None = stmt.get(_CMDS)
    if found is None:
        found = ()
        if stmt.get("objtype") == "OBJECT_TABLE":
            found = tuple((cmd.get("subtype", ""), cmd) for item in stmt.get("cmds") or ()
                          if (cmd := item.get("AlterTableCmd")) is not None)
        stmt[_CMDS] = found
    return found


def column_defs(stmt_type: str, stmt: Node) -> tuple[Node, ...]:
    """Column definitions a CREATE TABLE or ALTER TABLE ... ADD COLUMN introduces."""
    found: tuple[Node, ...] | None = stmt.get(_COLUMNS)
    if found is None:
        if stmt_type == "CreateStmt":
            found = tuple(element["ColumnDef"] for element in stmt.get("tableElts") or ()
                          if "ColumnDef" in element)
        elif stmt_type == "AlterTableStmt":
            found = tuple(definition["ColumnDef"] for subtype, cmd in alter_commands(stmt)
                          if subtype == "AT_AddColumn"
                          and "ColumnDef" in (definition := cmd.get("def") or {}))
        else:
            found = ()
        stmt[_COLUMNS] = found
    return found


def constraints(column: Node) -> Iterator[Node]:
    """The Constraint nodes attached to a column definition."""
    for item in column.get("constraints") or ():
        if "Constraint" in item:
            yield item["Constraint"]


def option_names(options: Iterable[Node] | None) -> set[str]:
    """``DefElem`` names in an option list, lower case (``VACUUM (FULL)`` -> ``{"full"}``)."""
    return {str(o["DefElem"].get("defname", "")).lower() for o in options or () if "DefElem" in o}


def typed_columns(kind: str, stmt: Node) -> tuple[tuple[str, Node, int | None], ...]:
    """(column, TypeName, location) for every column type a statement writes down.

    Covers CREATE TABLE columns, ALTER TABLE ... ADD COLUMN and ALTER COLUMN ... TYPE.
    """
    found: tuple[tuple[str, Node, int | None], ...] | None = stmt.get(_TYPED)
    if found is not None:
        return found
    typed = []
    for column in column_defs(kind, stmt):
        type_node = column.get("typeName")
        if type_node:
            typed.append((str(column.get("colname", "")), type_node, type_node.get("location")))
    if kind == "AlterTableStmt":
        for subtype, cmd in alter_commands(stmt):
            if subtype == "AT_AlterColumnType":
                type_node = (cmd.get("def") or {}).get("ColumnDef", {}).get("typeName")
                if type_node:
                    typed.append((str(cmd.get("name", "")), type_node,
                                  type_node.get("location")))
    stmt[_TYPED] = found = tuple(typed)
    return found


def walk(node: Any) -> Iterator[tuple[str, Node]]:
    """Every ``(type, body)`` wrapped node under ``node``, depth first."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, dict):  # (memo keys hold tuples: never walked)
                if key[:1].isupper():
                    yield key, value
                yield from walk(value)
            elif isinstance(value, list):
                for item in value:
                    yield from walk(item)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def function_names(node: Any) -> Iterator[str]:
    """The (unqualified, lower-case) name of every function called under ``node``."""
    for node_type, body in walk(node):
        if node_type == "FuncCall":
            names = strings(body.get("funcname"))
            if names:
                yield names[-1].lower()


#: Statements that take a table lock strong enough to queue behind (and then block) ordinary
#: traffic. UPDATE/DELETE (ROW EXCLUSIVE) are left out; see :func:`takes_blocking_lock`.
LOCKING_STATEMENTS = frozenset({
    "AlterTableStmt", "IndexStmt", "DropStmt", "RenameStmt", "LockStmt", "ReindexStmt",
    "ClusterStmt", "VacuumStmt", "TruncateStmt", "CreateTrigStmt", "RefreshMatViewStmt",
    "CreatePolicyStmt", "RuleStmt", "CreateStmt",
})


# Objects whose DROP or RENAME locks a table (or is one). A function, a type, an event
# trigger, a schema ... is locked only as a catalogue entry, which running queries never hold.
_TABLE_OBJECTS = frozenset({
    "OBJECT_TABLE", "OBJECT_INDEX", "OBJECT_VIEW", "OBJECT_MATVIEW", "OBJECT_SEQUENCE",
    "OBJECT_FOREIGN_TABLE", "OBJECT_COLUMN", "OBJECT_TABCONSTRAINT", "OBJECT_TRIGGER",
    "OBJECT_POLICY", "OBJECT_RULE", "OBJECT_STATISTIC_EXT", "OBJECT_EXTENSION",
})


def takes_blocking_lock(kind: str, stmt: Node) -> bool:
    """True if waiting for this statement's lock would make ordinary queries queue behind it.

    CONCURRENTLY variants, plain VACUUM, CREATE TABLE without foreign keys, and dropping or
    renaming what is not a table's (a function, a type, an event trigger; no CASCADE) do not.
    """
    if kind not in LOCKING_STATEMENTS:
        return False
    if kind == "DropStmt":
        return not stmt.get("concurrent") and (stmt.get("removeType") in _TABLE_OBJECTS
                                               or stmt.get("behavior") == "DROP_CASCADE")
    if kind == "RenameStmt":
        return stmt.get("renameType") in _TABLE_OBJECTS
    if kind == "IndexStmt":
        return not stmt.get("concurrent")
    if kind == "ReindexStmt":
        return "concurrently" not in option_names(stmt.get("params"))
    if kind == "VacuumStmt":
        return "full" in option_names(stmt.get("options"))
    if kind == "CreateStmt":  # locks the tables its foreign keys reference
        return bool(foreign_key_targets(kind, stmt))
    return True


def foreign_key_targets(kind: str, stmt: Node) -> tuple[Node, ...]:
    """Tables (RangeVars) a CREATE TABLE or ALTER TABLE's new foreign keys reference."""
    targets: tuple[Node, ...] | None = stmt.get(_FK)
    if targets is None:
        targets = stmt[_FK] = _foreign_key_targets(kind, stmt)
    return targets


def existing_foreign_key_targets(kind: str, stmt: Node, ctx: Context) -> list[Key]:
    """Keys of the tables a statement's new foreign keys lock: less the tables new in the change
    checked, and less a CREATE TABLE's own table (a key to itself, a comment's parent comment,
    locks nothing anyone else uses)."""
    keys = [ctx.key(t) for t in foreign_key_targets(kind, stmt) if not ctx.is_new_table(t)]
    if kind == "CreateStmt" and stmt.get("relation"):
        own = ctx.key(stmt["relation"])
        keys = [key for key in keys if key != own]
    return keys


def _foreign_key_targets(kind: str, stmt: Node) -> tuple[Node, ...]:
    found: list[Node] = []
    if kind == "CreateStmt":
        for element in stmt.get("tableElts") or ():
            if "Constraint" in element:
                found.append(element["Constraint"])
            elif "ColumnDef" in element:
                found.extend(constraints(element["ColumnDef"]))
    elif kind == "AlterTableStmt":
        for subtype, cmd in alter_commands(stmt):
            definition = cmd.get("def") or {}
            if subtype == "AT_AddConstraint" and "Constraint" in definition:
                found.append(definition["Constraint"])
            elif subtype == "AT_AddColumn" and "ColumnDef" in definition:
                found.extend(constraints(definition["ColumnDef"]))
    return tuple(c["pktable"] for c in found
                 if c.get("contype") == "CONSTR_FOREIGN" and c.get("pktable"))


# ALTER TABLE subcommands whose definition names a second table the statement locks.
_SECOND_TABLE = {"AT_AttachPartition": "PartitionCmd", "AT_DetachPartition": "PartitionCmd",
                 "AT_AddInherit": "RangeVar", "AT_DropInherit": "RangeVar"}
# Statements whose lock falls on the one table in their ``relation`` (or ``table``) field.
_ONE_TABLE = frozenset({"IndexStmt", "ClusterStmt", "CreateTrigStmt", "RefreshMatViewStmt",
                        "RuleStmt", "UpdateStmt", "DeleteStmt"})
_RENAMED_ON_TABLE = frozenset({"OBJECT_TABLE", "OBJECT_COLUMN", "OBJECT_TABCONSTRAINT",
                               "OBJECT_TRIGGER", "OBJECT_POLICY", "OBJECT_RULE"})


def locked_tables(kind: str, stmt: Node) -> tuple[Node, ...] | None:
    """The tables (RangeVars) a statement locks; None when it cannot be told from the text
    (a DROP, an index renamed, a CASCADE that reaches further)."""
    relation = stmt.get("relation")
    if kind == "AlterTableStmt":
        if stmt.get("objtype") != "OBJECT_TABLE" or not relation:
            return None
        found = [relation, *foreign_key_targets(kind, stmt)]
        for subtype, cmd in alter_commands(stmt):
            field = _SECOND_TABLE.get(subtype)
            if field is not None:
                definition = (cmd.get("def") or {}).get(field) or {}
                other = definition.get("name") if field == "PartitionCmd" else definition
                if not other:
                    return None
                found.append(other)
        return tuple(found)
    if kind == "CreateStmt":  # the tables its foreign keys reference, and its parents
        parents = [p["RangeVar"] for p in stmt.get("inhRelations") or () if "RangeVar" in p]
        return (*foreign_key_targets(kind, stmt), *parents)
    if kind == "RenameStmt":
        return (relation,) if relation and stmt.get("renameType") in _RENAMED_ON_TABLE else None
    if kind in ("LockStmt", "TruncateStmt"):
        if stmt.get("behavior") == "DROP_CASCADE":
            return None
        return tuple(r["RangeVar"] for r in stmt.get("relations") or () if "RangeVar" in r)
    if kind == "VacuumStmt":
        return tuple(r["VacuumRelation"]["relation"] for r in stmt.get("rels") or ()
                     if r.get("VacuumRelation", {}).get("relation")) or None
    if kind == "ReindexStmt":
        return (relation,) if relation and stmt.get("kind") == "REINDEX_OBJECT_TABLE" else None
    if kind == "CreatePolicyStmt":
        return (stmt["table"],) if stmt.get("table") else None
    if kind in _ONE_TABLE:
        return (relation,) if relation else None
    return None


def only_new_tables(kind: str, stmt: Node, ctx: Context) -> bool:
    """True if every table the statement locks was created earlier in the change checked.

    Nobody else can be waiting on such a table: inside the transaction that created it, no
    other session can even see it; run statement by statement, it became visible a moment
    ago to sessions that have no reason to use it yet. Its lock is granted at once, and it
    holds only the rows this change wrote.
    """
    tables = locked_tables(kind, stmt)
    return bool(tables) and all(ctx.is_new_table(table) for table in tables or ())
