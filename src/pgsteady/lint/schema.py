"""The schema a migration folder builds, replayed statement by statement, for the rules to ask.

Tables with their columns' types, indexes, views, enums and partitions, keyed the way
PostgreSQL names them: ``(schema, name)`` with unquoted names already folded to lower case by
the parser and quoted ones kept as written, unqualified names resolved on ``search_path``
(``public`` unless a ``SET search_path`` says otherwise). Rules ask it the old type of a
column (is this ``ALTER ... TYPE`` a rewrite?), whether a table is new in the change being
checked (nobody else can be using it yet), and whether a view or type already exists.

What the replay cannot know stays unknown (``None``): a table created by ``LIKE`` or ``AS
SELECT``, or one that existed before the first file replayed. With ``--dsn`` the live catalog
is loaded first (:meth:`Schema.add_table`), and the replay goes on from there.

"New" means created in the change being checked: in the same file, or, when earlier files are
given as history (``--history``), in any file being checked. A table created in a history
file, or by ``CREATE TABLE IF NOT EXISTS`` when the table was already known, is not new.
"""

from __future__ import annotations

from collections.abc import Iterable

from pgsteady._record import Record

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any, Final

    Node = dict[str, Any]
else:
    Node = dict
Key = tuple[str, str]
_KEY = "\x00key"  # where a RangeVar keeps its resolved key (a tuple: never walked)

#: Names the parser leaves as written that mean a built-in type (``serial`` is ``int4``).
_ALIASES = {
    "serial": "int4", "serial4": "int4", "bigserial": "int8", "serial8": "int8",
    "smallserial": "int2", "serial2": "int2", "integer": "int4", "int": "int4",
    "bigint": "int8", "smallint": "int2", "boolean": "bool", "decimal": "numeric",
    "character varying": "varchar", "real": "float4", "double precision": "float8",
}
#: Type pairs whose values are binary coercible: no rewrite (``varchar`` -> ``text``).
_BINARY_COERCIBLE = frozenset({("varchar", "text"), ("text", "varchar"), ("cidr", "inet"),
                               ("varbit", "bit"), ("bit", "varbit")})
#: Types whose modifier may grow without a rewrite (PostgreSQL's *_support functions).
_WIDENS = frozenset({"varchar", "varbit", "numeric", "timestamp", "timestamptz", "time",
                     "timetz", "interval"})
#: Targets some other type reaches without a rewrite: with the old type unknown, a change to
#: one of these only *may* rewrite.
MAYBE_NO_REWRITE = frozenset(_WIDENS | {"text", "inet", "bit"})


class ColumnType(Record):
    """A column's type as PostgreSQL names it: ``varchar`` with ``(36,)``, ``int8``, ..."""

    __slots__ = ("array", "mods", "name")

    def __init__(self, name: str, mods: tuple[int, ...] = (), array: bool = False) -> None:
        self.name: Final = name
        self.mods: Final = mods
        self.array: Final = array

    def __str__(self) -> str:
        mods = f"({', '.join(map(str, self.mods))})" if self.mods else ""
        return f"{self.name}{mods}{'[]' if self.array else ''}"


def column_type(type_node: Node | None) -> ColumnType | None:
    """A TypeName node as a :class:`ColumnType`; None for ``%TYPE`` and odd modifiers."""
    if not type_node or type_node.get("pct_type"):
        return None
    names = [n["String"]["sval"] for n in type_node.get("names") or () if "String" in n]
    if not names:
        return None
    name = names[-1]
    if len(names) == 1 or names[0] == "pg_catalog":
        name = _ALIASES.get(name.lower(), name.lower())
    mods: list[int] = []
    for mod in type_node.get("typmods") or ():
        const = mod.get("A_Const", {})
        if "ival" not in const:
            return ColumnType(name, (), bool(type_node.get("arrayBounds")))
        mods.append(int(const["ival"].get("ival", 0)))
    return ColumnType(name, tuple(mods), bool(type_node.get("arrayBounds")))


def rewrites(old: ColumnType | None, new: ColumnType) -> bool | None:
    """True if changing ``old`` to ``new`` rewrites the table, False if not, None unknown.

    No rewrite: the same type, ``varchar`` <-> ``text`` (to an unbounded target), widening a
    ``varchar``/``numeric``/``timestamp`` modifier (same scale for ``numeric``), or dropping
    it. Everything else rewrites, ``char(n)`` -> ``varchar`` included (it trims blanks).
    """
    if old is None:
        return None
    if old == new:
        return False
    if old.array != new.array:
        return True
    if old.name == new.name:
        return not _widens(old, new)
    if (old.name, new.name) in _BINARY_COERCIBLE:
        return bool(new.mods)  # text -> varchar(n) must check every value's length
    return True


def _widens(old: ColumnType, new: ColumnType) -> bool:
    if old.name not in _WIDENS:
        return False
    if not new.mods:
        return True
    if not old.mods:
        return False
    if old.name == "numeric":
        old_scale = old.mods[1] if len(old.mods) > 1 else 0
        new_scale = new.mods[1] if len(new.mods) > 1 else 0
        return new.mods[0] >= old.mods[0] and new_scale == old_scale
    return new.mods[0] >= old.mods[0]


class Table(Record):
    """What is known about one table. ``columns`` is complete only if ``complete``;
    ``not_null`` holds the columns known to be NOT NULL (declared so, a primary key's,
    an identity or serial column), never more."""

    __slots__ = ("columns", "complete", "created_in", "not_null", "partition_of",
                 "partitioned")
    __hash__ = None  # type: ignore[assignment]  # changes after it is made

    def __init__(self, columns: dict[str, ColumnType | None] | None = None, *,
                 created_in: int = -1, complete: bool = True, partition_of: Key | None = None,
                 partitioned: bool = False) -> None:
        self.columns: dict[str, ColumnType | None] = {} if columns is None else columns
        self.created_in = created_in  # the file that created it; -1: it existed before
        self.complete = complete
        self.partition_of = partition_of
        self.partitioned = partitioned
        self.not_null: set[str] = set()


class Schema(Record):
    """The objects the replayed migrations have built, and the change being checked."""

    __slots__ = ("change_start", "enums", "enums_created", "file_serial", "from_catalog",
                 "indexes", "one_change", "search_path", "tables", "views")
    __hash__ = None  # type: ignore[assignment]  # changes after it is made

    def __init__(self, *, file_serial: int = 0, from_catalog: bool = False) -> None:
        self.tables: dict[Key, Table] = {}
        self.views: dict[Key, int] = {}  # -> the file that created it
        self.indexes: dict[Key, Key] = {}  # -> its table
        self.enums: dict[Key, list[str]] = {}  # -> its labels
        self.enums_created: dict[Key, int] = {}
        self.search_path: tuple[str, ...] = ("public",)
        #: The file being replayed now (0, 1, ...) and the first file of the change checked.
        self.file_serial = file_serial
        self.change_start = 0
        #: True when history was given: then all files checked are one change (else each).
        self.one_change = False
        #: True once a live catalog was loaded: then an unknown table is known not to exist.
        self.from_catalog = from_catalog

    # -- names -------------------------------------------------------------------------

    def key(self, relation: Node, existing: dict[Key, Any] | None = None) -> Key:
        """A RangeVar's (schema, name); unqualified names are looked up on search_path.

        A table's key is kept in the RangeVar (rules ask for it many times per statement).
        """
        if existing is None:
            known: Key | None = relation.get(_KEY)
            if known is not None:
                return known
        name = str(relation.get("relname", ""))
        schema = relation.get("schemaname")
        if schema:
            found = str(schema), name
        else:
            found = self._resolve(name, self.tables if existing is None else existing)
        if existing is None and relation:
            relation[_KEY] = found
        return found

    def name_key(self, names: Iterable[str], existing: dict[Key, Any]) -> Key:
        """``["audit", "events"]`` or ``["events"]`` (a qualified name list) as a key."""
        parts = list(names)
        if len(parts) >= 2:
            return parts[-2], parts[-1]
        return self._resolve(parts[-1] if parts else "", existing)

    def _resolve(self, name: str, existing: dict[Key, Any]) -> Key:
        if self.search_path == ("public",):  # the usual case, asked for every statement
            return "public", name
        path = [s for s in self.search_path if s and not s.startswith("$")] or ["public"]
        for schema in path:
            if (schema, name) in existing:
                return schema, name
        return path[0], name

    # -- questions ---------------------------------------------------------------------

    def table(self, relation: Node | None) -> Table | None:
        """The table a RangeVar names, if the replay knows it."""
        if not relation:
            return None
        return self.tables.get(self.key(relation))

    def is_new(self, relation: Node | None) -> bool:
        """True if the table was created in the change being checked."""
        table = self.table(relation)
        return table is not None and table.created_in >= self.change_start

    def is_new_key(self, key: Key) -> bool:
        """True if the table ``key`` was created in the change being checked."""
        table = self.tables.get(key)
        return table is not None and table.created_in >= self.change_start

    def type_of(self, relation: Node, column: str) -> ColumnType | None:
        """The column's current type, or None if unknown."""
        table = self.table(relation)
        return table.columns.get(column) if table is not None else None

    def view_exists(self, relation: Node) -> bool:
        return self.key(relation, self.views) in self.views

    def view_is_new(self, relation: Node) -> bool:
        """True if the view was created in the change being checked."""
        return self.views.get(self.key(relation, self.views), -1) >= self.change_start

    def enum_is_new(self, names: Iterable[str]) -> bool:
        """True if the enum type was created in the change being checked."""
        key = self.name_key(names, self.enums)
        return self.enums_created.get(key, -1) >= self.change_start

    def add_table(self, key: Key, columns: dict[str, ColumnType | None]) -> None:
        """A table from a live catalog: it existed before any file replayed."""
        self.tables[key] = Table(dict(columns), created_in=-1)

    # -- the replay --------------------------------------------------------------------

    def apply(self, kind: str, stmt: Node) -> None:
        """Record what one statement creates, changes or drops."""
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, stmt)

    def _create(self, stmt: Node) -> None:
        key = self.key(stmt.get("relation") or {})
        if key in self.tables and stmt.get("if_not_exists"):
            return
        table = Table(created_in=self.file_serial)
        for element in stmt.get("tableElts") or ():
            column = element.get("ColumnDef")
            if column is not None:
                table.columns[str(column.get("colname", ""))] = column_type(
                    column.get("typeName"))
                _learn_not_null(table, column)
            elif "Constraint" in element:
                table.not_null.update(_primary_key_columns(element["Constraint"]))
            elif "TableLikeClause" in element:
                table.complete = False
        if stmt.get("ofTypename"):
            table.complete = False
        parents = [p.get("RangeVar", {}) for p in stmt.get("inhRelations") or ()]
        if stmt.get("partbound") and parents:
            table.partition_of = self.key(parents[0])
            parent = self.tables.get(table.partition_of)
            if parent is not None:
                table.columns = {**parent.columns, **table.columns}
                table.complete = parent.complete
                table.not_null |= parent.not_null
        elif parents:
            table.complete = False
        table.partitioned = bool(stmt.get("partspec"))
        self.tables[key] = table

    def _create_as(self, stmt: Node) -> None:
        into = stmt.get("into") or {}
        key = self.key(into.get("rel") or {})
        if key in self.tables and stmt.get("if_not_exists"):
            return
        self.tables[key] = Table(created_in=self.file_serial, complete=False)

    def _select(self, stmt: Node) -> None:  # SELECT ... INTO t
        into = stmt.get("intoClause")
        if into:
            self.tables[self.key(into.get("rel") or {})] = Table(
                created_in=self.file_serial, complete=False)

    def _view(self, stmt: Node) -> None:
        key = self.key(stmt.get("view") or {}, self.views)
        self.views.setdefault(key, self.file_serial)

    def _index(self, stmt: Node) -> None:
        relation = stmt.get("relation") or {}
        name = stmt.get("idxname")
        if name:
            table = self.key(relation)
            self.indexes[(table[0], str(name))] = table

    def _enum(self, stmt: Node) -> None:
        names = [n["String"]["sval"] for n in stmt.get("typeName") or () if "String" in n]
        values = [v["String"]["sval"] for v in stmt.get("vals") or () if "String" in v]
        key = self.name_key(names, self.enums)
        self.enums[key] = values
        self.enums_created[key] = self.file_serial

    def _alter_enum(self, stmt: Node) -> None:
        names = [n["String"]["sval"] for n in stmt.get("typeName") or () if "String" in n]
        values = self.enums.get(self.name_key(names, self.enums))
        if values is None:
            return
        old, new = stmt.get("oldVal"), stmt.get("newVal")
        if old and new and old in values:
            values[values.index(old)] = str(new)
        elif new and new not in values:
            values.append(str(new))

    def _drop(self, stmt: Node) -> None:
        kind = stmt.get("removeType")
        for obj in stmt.get("objects") or ():
            names = [n["String"]["sval"] for n in obj.get("List", {}).get("items") or ()
                     if "String" in n]
            if not names:  # DROP TYPE names come as TypeName nodes
                type_node = obj.get("TypeName", {})
                names = [n["String"]["sval"] for n in type_node.get("names") or ()
                         if "String" in n]
            if kind in ("OBJECT_TABLE", "OBJECT_MATVIEW", "OBJECT_FOREIGN_TABLE"):
                self.tables.pop(self.name_key(names, self.tables), None)
            elif kind == "OBJECT_VIEW":
                self.views.pop(self.name_key(names, self.views), None)
            elif kind == "OBJECT_INDEX":
                self.indexes.pop(self.name_key(names, self.indexes), None)
            elif kind in ("OBJECT_TYPE", "OBJECT_DOMAIN"):
                key = self.name_key(names, self.enums)
                self.enums.pop(key, None)
                self.enums_created.pop(key, None)

    def _rename(self, stmt: Node) -> None:
        kind = stmt.get("renameType")
        relation = stmt.get("relation") or {}
        new = str(stmt.get("newname", ""))
        if kind == "OBJECT_TABLE":
            key = self.key(relation)
            if key in self.tables:
                self.tables[(key[0], new)] = self.tables.pop(key)
        elif kind == "OBJECT_COLUMN":
            table = self.table(relation)
            old = str(stmt.get("subname", ""))
            if table is not None and old in table.columns:
                table.columns[new] = table.columns.pop(old)
            if table is not None and old in table.not_null:
                table.not_null.discard(old)
                table.not_null.add(new)
        elif kind == "OBJECT_VIEW":
            key = self.key(relation, self.views)
            if key in self.views:
                self.views[(key[0], new)] = self.views.pop(key)
        elif kind == "OBJECT_INDEX":
            key = self.key(relation, self.indexes)
            if key in self.indexes:
                self.indexes[(key[0], new)] = self.indexes.pop(key)

    def _set_schema(self, stmt: Node) -> None:
        relation = stmt.get("relation") or {}
        target = str(stmt.get("newschema", ""))
        kind = stmt.get("objectType")
        if kind == "OBJECT_TABLE":
            key = self.key(relation)
            if key in self.tables:
                self.tables[(target, key[1])] = self.tables.pop(key)
        elif kind == "OBJECT_VIEW":
            key = self.key(relation, self.views)
            if key in self.views:
                self.views[(target, key[1])] = self.views.pop(key)

    def _alter(self, stmt: Node) -> None:
        if stmt.get("objtype") != "OBJECT_TABLE":
            return
        table = self.table(stmt.get("relation"))
        for item in stmt.get("cmds") or ():
            cmd = item.get("AlterTableCmd", {})
            subtype = cmd.get("subtype")
            definition = cmd.get("def") or {}
            if subtype in ("AT_AttachPartition", "AT_DetachPartition"):
                part = self.tables.get(self.key(definition.get("PartitionCmd", {})
                                                .get("name") or {}))
                if part is not None:
                    part.partition_of = (self.key(stmt.get("relation") or {})
                                         if subtype == "AT_AttachPartition" else None)
                continue
            if table is None:
                continue
            name = str(cmd.get("name", ""))
            if subtype == "AT_AddColumn" and "ColumnDef" in definition:
                column = definition["ColumnDef"]
                colname = str(column.get("colname", ""))
                if colname not in table.columns:
                    table.columns[colname] = column_type(column.get("typeName"))
                    _learn_not_null(table, column)
            elif subtype == "AT_DropColumn":
                table.columns.pop(name, None)
                table.not_null.discard(name)
            elif subtype == "AT_SetNotNull":
                table.not_null.add(name)
            elif subtype == "AT_DropNotNull":
                table.not_null.discard(name)
            elif subtype == "AT_AddConstraint" and "Constraint" in definition:
                table.not_null.update(_primary_key_columns(definition["Constraint"]))
            elif subtype == "AT_AlterColumnType" and "ColumnDef" in definition:
                table.columns[name] = column_type(definition["ColumnDef"].get("typeName"))

    def _set(self, stmt: Node) -> None:
        if str(stmt.get("name", "")).lower() != "search_path":
            return
        if stmt.get("kind") != "VAR_SET_VALUE":
            self.search_path = ("public",)
            return
        path = []
        for arg in stmt.get("args") or ():
            const = arg.get("A_Const", {})
            if "sval" in const:
                path.append(str(const["sval"].get("sval", "")))
            else:
                fields = arg.get("ColumnRef", {}).get("fields") or ()
                path.extend(f["String"]["sval"] for f in fields if "String" in f)
        self.search_path = tuple(p.strip() for p in path) or ("public",)


_SERIALS = frozenset({"serial", "serial2", "serial4", "serial8", "smallserial", "bigserial"})


def _learn_not_null(table: Table, column: Node) -> None:
    """Note a new column as NOT NULL if its definition makes it so."""
    kinds = {c.get("Constraint", {}).get("contype") for c in column.get("constraints") or ()}
    names = [n["String"]["sval"] for n in (column.get("typeName") or {}).get("names") or ()
             if "String" in n]
    if kinds & {"CONSTR_NOTNULL", "CONSTR_PRIMARY", "CONSTR_IDENTITY"} or column.get(
            "is_not_null") or (len(names) == 1 and names[0].lower() in _SERIALS):
        table.not_null.add(str(column.get("colname", "")))


def _primary_key_columns(constraint: Node) -> list[str]:
    """The columns a PRIMARY KEY constraint makes NOT NULL (none known for USING INDEX)."""
    if constraint.get("contype") != "CONSTR_PRIMARY":
        return []
    return [k["String"]["sval"] for k in constraint.get("keys") or () if "String" in k]


_HANDLERS = {
    "CreateStmt": Schema._create,
    "CreateTableAsStmt": Schema._create_as,
    "SelectStmt": Schema._select,
    "ViewStmt": Schema._view,
    "IndexStmt": Schema._index,
    "CreateEnumStmt": Schema._enum,
    "AlterEnumStmt": Schema._alter_enum,
    "DropStmt": Schema._drop,
    "RenameStmt": Schema._rename,
    "AlterObjectSchemaStmt": Schema._set_schema,
    "AlterTableStmt": Schema._alter,
    "VariableSetStmt": Schema._set,
}
#: Statement types the replay learns from (the engine decodes these even if no rule asks).
REPLAYED = frozenset(_HANDLERS) - {"SelectStmt"}
