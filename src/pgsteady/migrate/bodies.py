"""The functions and triggers a pending statement runs, found in the catalog or in the pending
migrations' text, and what they lock.

``SELECT backfill()`` and ``INSERT INTO posts ...`` show no lock of what runs inside them: a
function body that ALTERs a table, a trigger that refreshes three materialized views. Here
each function a statement calls (``pg_proc``, or a ``CREATE FUNCTION`` earlier in the pending
migrations, which wins over the catalog's) and each enabled trigger its data changes fire
(``pg_trigger``, for the events the statement causes, on the tables it writes, their
partitions, the base tables of a view written through, and the tables a cascading foreign key
changes) is read with :mod:`~pgsteady.sql.bodies`; what those statements call and fire is
followed in turn, each function once (a cycle ends there), at most :data:`MAX_DEPTH` deep and
:data:`MAX_FUNCTIONS` behind one statement; each body is read once per run. PostgreSQL's own
functions and an extension's C functions lock no table of the application's; anything else
that cannot be read (a C function of one's own, a body in another language, a name found
nowhere, an ``EXECUTE`` of a computed string) comes back as a reason, so preflight never says
ok over it. A name found nowhere after a pending
``CREATE EXTENSION`` is taken as that extension's. Reads only the catalog.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import psycopg

from pgsteady.migrate import queries, resolve
from pgsteady.sql import bodies
from pgsteady.sql.locks import LockMode, Reach, Target

if TYPE_CHECKING:
    from pgsteady.sql.bodies import Definition
    from pgsteady.sql.opaque import Reading
    from pgsteady.sql.reads import Write
    from pgsteady.sql.statement import StatementInfo

MAX_DEPTH = 8  # functions calling functions (or firing triggers) deeper than this: unknown
MAX_FUNCTIONS = 100  # distinct functions one statement runs, all the way down
_OWN_SCHEMAS = frozenset({"pg_catalog", "information_schema"})
# pg_trigger.tgtype's event bits (trigger.h).
_EVENT_BITS = {"INSERT": 4, "DELETE": 8, "UPDATE": 16, "TRUNCATE": 32}
_CASCADED = frozenset({"UPDATE", "DELETE"})  # what a foreign key's action does to its rows
_RE = LockMode.ROW_EXCLUSIVE


@dataclass
class Followed:
    """What the functions and triggers behind one statement lock: their statements (placed
    at its line, kinds like ``UPDATE in backfill()``) and why anything stays unknown."""

    statements: list[StatementInfo] = field(default_factory=list)
    unknown: list[tuple[int, str]] = field(default_factory=list)  # (file line, why)


@dataclass(frozen=True)
class _Function:
    key: str  # the oid, or "text:" and the name for one the pending migrations create
    name: str
    definition: Definition | None = None
    why: str = ""  # why its body cannot be read ("" when it can, or locks nothing)


class Follower:
    """Follows calls and triggers for the statements of the pending migrations, in order
    (:meth:`learn` each statement before the ones after it are followed)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.defined: dict[str, Definition] = {}  # by unqualified name, from the pending text
        self.triggers: list[tuple[str | None, str, frozenset[str], str]] = []
        self.extension_made = False  # a pending CREATE EXTENSION: its functions are not in yet
        self._by_name: dict[str, list[tuple[Any, ...]]] = {}
        self._fired: dict[tuple[Any, ...], list[tuple[str, _Function]]] = {}
        self._read: dict[str, Reading] = {}  # by function key: each body is read once
        self._on_table: dict[int, list[tuple[str, str, int, _Function]]] | None = None
        self._resolved: dict[str, Any] = {}  # resolve.relations' cache
        self._cascade_to: set[int] = set()  # tables with triggers and a foreign key
        self._made = 0  # definitions learnt from the text (a key each)

    def prefetch(self, names: Iterable[str]) -> None:
        """Look up every function ``names`` (as written) may mean, in one query."""
        wanted = sorted({name.rpartition(".")[2] for name in names} - set(self._by_name))
        if not wanted:
            return
        for bare in wanted:
            self._by_name[bare] = []
        for row in self.conn.execute(queries.FUNCTIONS_NAMED, {"names": wanted}).fetchall():
            self._by_name[str(row[2])].append(tuple(row))

    def learn(self, statement: StatementInfo) -> None:
        """Note a function or trigger the pending text creates (used from then on)."""
        if statement.kind in ("CREATE FUNCTION", "CREATE PROCEDURE"):
            made = bodies.definition(statement.sql)
            if made is not None:
                self._made += 1
                self.defined[made.name.rpartition(".")[2]] = replace(
                    made, key=f"text:{self._made}:{made.name}")
        elif statement.kind in ("CREATE TRIGGER", "CREATE CONSTRAINT TRIGGER"):
            self._learn_trigger(statement.sql)
        elif statement.kind == "CREATE EXTENSION":
            self.extension_made = True

    def _learn_trigger(self, sql: str) -> None:
        import pglast  # noqa: PLC0415 - when the text creates a trigger

        try:
            [raw] = pglast.parse_sql(sql)
        except (pglast.parser.ParseError, ValueError):
            return
        node: Any = raw.stmt
        events = frozenset(e for e, bit in _EVENT_BITS.items() if int(node.events) & bit)
        function = ".".join(p.sval for p in node.funcname)
        self.triggers.append((node.relation.schemaname or None, node.relation.relname, events,
                              function))

    def follow(self, statement: StatementInfo) -> Followed:
        """What the functions ``statement`` calls and the triggers it fires lock, all the
        way down (bounded)."""
        out = Followed()
        seen: set[str] = set()
        todo: deque[tuple[StatementInfo, int, str]] = deque([(statement, 0, "")])
        while todo:
            current, depth, via = todo.popleft()
            found = [(f"calls {name}()", f) for name in current.calls
                     for f in self._functions(name, procedure=current.kind.startswith("CALL"))]
            found += [(f"fires {trigger}", f) for write in current.writes
                      for trigger, f in self._triggers(write)]
            for how, function in found:
                if function.why:
                    out.unknown.append((statement.line, f"{via}{how}: {function.why}"))
                    continue
                if function.definition is None or function.key in seen:
                    continue  # PostgreSQL's own, an extension's C, or read already
                seen.add(function.key)
                if depth >= MAX_DEPTH or len(seen) > MAX_FUNCTIONS:
                    limit = f"deeper than {MAX_DEPTH} functions" if depth >= MAX_DEPTH \
                        else f"more than {MAX_FUNCTIONS} functions"
                    out.unknown.append((statement.line, f"{via}{how}: {limit} are not "
                                                         f"followed"))
                    continue
                reading = self._reading(function.key, function.definition)
                out.unknown += [(statement.line, f"{via}{how}: {why}")
                                for _, why in reading.unknown]
                for body_statement in reading.statements:
                    inner = replace(body_statement, line=statement.line)
                    out.statements.append(inner)
                    todo.append((inner, depth + 1, f"{via}{how}, which "))
        return out

    def _reading(self, key: str, definition: Definition) -> Reading:
        """What a function's body locks, read once per run (a catalog or a text holds
        finitely many)."""
        if key not in self._read:
            self._read[key] = bodies.read_definition(definition, 0, 0)
        return self._read[key]

    def _functions(self, name: str, *, procedure: bool = False) -> list[_Function]:
        """What a call of ``name`` (as written) may run: a definition from the pending text,
        the catalog's overloads; none when it is PostgreSQL's own; a reason when unreadable."""
        schema, _, bare = name.rpartition(".")
        schema = schema.rpartition(".")[2]  # database.schema.name
        if schema in _OWN_SCHEMAS:
            return []
        rows = self._catalog(bare)
        if not schema and any(row[1] == "pg_catalog" for row in rows):
            return []  # an unqualified name finds pg_catalog's first
        made = self.defined.get(bare)
        if made is not None and (not schema or made.name == name):
            # Created (or replaced) earlier in the pending text: that body runs, not the one
            # pg_proc holds now.
            return [_Function(made.key, made.name, made)]
        out = [_function(row) for row in rows if (row[1] == schema if schema else row[5])]
        # Not found after a pending CREATE EXTENSION: taken as the extension's (a gap: an
        # extension's SQL functions are read only once it is installed).
        if not out and not self.extension_made:
            what = "CALL runs a procedure" if procedure else "a function"
            out.append(_Function(f"missing:{name}", name, why=(
                f"{what} whose body preflight cannot find ({name} is neither in the "
                f"database nor created earlier in the pending migrations)")))
        return out

    def _catalog(self, bare: str) -> list[tuple[Any, ...]]:
        self.prefetch([bare])
        return self._by_name[bare]

    def _triggers(self, write: Write) -> list[tuple[str, _Function]]:
        """The triggers a data change fires (``name on table``) and their functions: the
        catalog's (looked up once per table and events), then those the text created."""
        key = (write.schema, write.name, write.events, write.inh)
        if key not in self._fired:
            self._fired[key] = self._catalog_triggers(write) if self._any_trigger_here() \
                else []
        out = list(self._fired[key])
        for schema, table, on, function_name in self.triggers:
            if table == write.name and (schema is None or write.schema is None or
                                        schema == write.schema) and on & write.events:
                out += [(f"trigger on {table} calling {function_name}()", f)
                        for f in self._functions(function_name)]
        return out

    def _any_trigger_here(self) -> bool:
        """Whether any table has a trigger; read with all of them (and their functions), once."""
        if self._on_table is None:
            rows = self.conn.execute(queries.TRIGGERS).fetchall()
            functions = {}
            if rows:
                found = self.conn.execute(queries.FUNCTIONS_BY_OID,
                                          {"oids": sorted({row[4] for row in rows})})
                functions = {int(row[0]): _function(tuple(row)) for row in found.fetchall()}
            self._on_table = {}
            for oid, table, trigger, tgtype, function_oid in rows:
                if function_oid in functions:
                    self._on_table.setdefault(int(oid), []).append(
                        (str(table), str(trigger), int(tgtype), functions[function_oid]))
            if self._on_table:
                found = self.conn.execute(queries.WITH_FOREIGN_KEYS,
                                          {"oids": sorted(self._on_table)})
                self._cascade_to = {int(row[0]) for row in found.fetchall()}
        return bool(self._on_table)

    def prefetch_writes(self, writes: Iterable[Write]) -> None:
        """Resolve every table ``writes`` name in one query (when any table has a trigger)."""
        if self._any_trigger_here():
            targets = [t for write in writes for t in _written(write)]
            self._resolved.update(resolve.prefetch(self.conn, targets))

    def _catalog_triggers(self, write: Write) -> list[tuple[str, _Function]]:
        on_table = self._on_table or {}
        events: dict[int, set[str]] = {}
        for locked in resolve.relations(self.conn, _written(write), self._resolved):
            events.setdefault(locked.oid, set()).update(write.events)
        if write.events & _CASCADED and self._cascade_to:  # a trigger on a referencing table
            cascaded = Target(write.schema, write.name, _RE, Reach.REFERENCING)
            for locked in resolve.relations(self.conn, [cascaded], self._resolved):
                events.setdefault(locked.oid, set()).update(_CASCADED)
        return [(f"trigger {trigger} on {table}", function)
                for oid, wanted in events.items()
                for table, trigger, tgtype, function in on_table.get(oid, ())
                if any(tgtype & _EVENT_BITS[e] for e in wanted)]


def _written(write: Write) -> list[Target]:
    """The relations a data change writes rows of: the table (or a view's base tables) and,
    unless ONLY, its partitions and children."""
    targets = [Target(write.schema, write.name, _RE),
               Target(write.schema, write.name, _RE, Reach.READS)]
    if write.inh:
        targets.append(Target(write.schema, write.name, _RE, Reach.DESCENDANTS))
    return targets


def _function(row: tuple[Any, ...]) -> _Function:
    """A pg_proc row (queries.FUNCTIONS_NAMED's columns) as something to read, or not."""
    oid, schema, name, language, kind, _on_path, in_extension, definition = row
    qualified = f"{schema}.{name}"
    if schema in _OWN_SCHEMAS:
        return _Function(str(oid), qualified)
    if kind in ("a", "w") and not in_extension:
        what = "an aggregate" if kind == "a" else "a window function"
        return _Function(str(oid), qualified, why=f"{qualified}() is {what}: preflight does "
                                                  f"not read its support functions")
    if language in ("c", "internal"):
        if in_extension:
            return _Function(str(oid), qualified)  # an extension's C code: no table of ours
        return _Function(str(oid), qualified, why=f"{qualified}() is written in {language}: "
                                                  f"preflight cannot read its body")
    if definition is None:
        return _Function(str(oid), qualified, why=f"{qualified}() is in language {language}: "
                                                  f"preflight reads SQL and PL/pgSQL bodies only")
    made = bodies.definition(str(definition))
    if made is None:
        return _Function(str(oid), qualified, why=f"the definition of {qualified}() does "
                                                  f"not parse")
    return _Function(str(oid), qualified, replace(made, name=qualified))
