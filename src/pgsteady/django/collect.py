"""The SQL of Django migrations, as ``sqlmigrate`` writes it, with where each statement came from.

Lint and preflight judge SQL; Django writes it from the migrations' operations and the
project state before each one. Every migration of the plan is rendered in order (the state
carried from one to the next, as Django's executor does); each SQL line is mapped back to
its operation and that operation's line in the migration file, so a finding points at the
``migrations.AddField(...)`` that wrote it. Operations that are Python (``RunPython``)
write no SQL: they are listed, since nobody can say what they lock.

Rendering needs a database, as ``sqlmigrate`` does: Django quotes values through the driver
and some operations read the catalog (``AlterField`` looks up constraint names). Nothing is
written; an empty database will do: names looked up on a table it does not have are those
Django gives when it creates them (:func:`_own_names`).
"""

from __future__ import annotations

import ast
import inspect
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("pgsteady.django")

_THIRD_PARTY = ("site-packages", "dist-packages")


@dataclass(frozen=True)
class Operation:
    """One operation of a migration: its place in the file, and the first line of its SQL."""

    number: int  # 1-based
    description: str
    line: int  # in the migration file
    col: int
    sql_line: int  # in the rendered SQL; 0 when it writes none
    writes_sql: bool = True
    python: bool = False  # RunPython: no SQL to read, its locks unknown


@dataclass
class Rendered:
    """One migration's SQL (lines of the text map to operations) or why it has none."""

    app_label: str
    name: str
    path: str  # the migration file, relative to the current folder when under it
    atomic: bool
    sql: str = ""
    operations: list[Operation] = field(default_factory=list)
    error: str = ""

    @property
    def label(self) -> str:
        return f"{self.app_label}.{self.name}"

    def operation_at(self, sql_line: int) -> Operation | None:
        """The operation whose SQL holds ``sql_line``."""
        found = None
        for operation in self.operations:
            if operation.writes_sql and 0 < operation.sql_line <= sql_line:
                found = operation
        return found

    def where(self, sql_line: int) -> str:
        """``file:line (operation N: description)`` for a line of the SQL."""
        operation = self.operation_at(sql_line)
        if operation is None:
            return f"{self.path} ({self.label})"
        return (f"{self.path}:{operation.line} ({self.label} operation {operation.number}: "
                f"{operation.description})")


def _display(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def _operation_places(migration: Any) -> tuple[str, list[tuple[int, int]]]:
    """The migration's file, and (line, col) of each element of its ``operations`` list."""
    module = sys.modules.get(type(migration).__module__)
    path = getattr(module, "__file__", None) or ""
    places: list[tuple[int, int]] = []
    try:
        tree = ast.parse(inspect.getsource(module)) if module is not None else None
    except (OSError, TypeError, SyntaxError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List | ast.Tuple) and \
                any(isinstance(t, ast.Name) and t.id == "operations" for t in node.targets):
            places = [(e.lineno, e.col_offset + 1) for e in node.value.elts]
            break
    return _display(path), places


def _noop(operation: Any) -> bool:
    """``RunPython(RunPython.noop)``: Python that does nothing locks nothing."""
    from django.db.migrations import RunPython  # noqa: PLC0415 - after django.setup()

    return isinstance(operation, RunPython) and operation.code is RunPython.noop


def is_third_party(app_config: Any) -> bool:
    """Django's own apps and installed packages: not the project's to lint by default."""
    return any(part in Path(app_config.path).parts for part in _THIRD_PARTY) or \
        app_config.name.startswith("django.")


def forwards_plan(loader: Any) -> list[Any]:
    """Every migration of the graph in an order Django could apply them."""
    seen: set[tuple[str, str]] = set()
    plan: list[Any] = []
    for leaf in sorted(loader.graph.leaf_nodes()):
        for key in loader.graph.forwards_plan(leaf):
            if key not in seen:
                seen.add(key)
                plan.append(loader.graph.nodes[key])
    return plan


def render(connection: Any, loader: Any, wanted: set[tuple[str, str]]) -> list[Rendered]:
    """The SQL of the ``wanted`` migrations and of every migration before them in the plan
    (the lint's history), in plan order. Migrations after the last wanted one are left out."""
    plan = forwards_plan(loader)
    last = max((i for i, m in enumerate(plan) if (m.app_label, m.name) in wanted), default=-1)
    out: list[Rendered] = []
    state = None
    for migration in plan[:last + 1]:
        if state is None:
            state = loader.project_state((migration.app_label, migration.name), at_end=False)
        rendered, state = _render_one(connection, migration, state)
        out.append(rendered)
    return out


def _own_names(editor: Any) -> None:
    """Django looks some names up in the catalog (``RenameIndex`` of an unnamed index,
    ``AlterUniqueTogether`` or ``AlterIndexTogether`` dropping one); on a database without the
    model's table (lint's empty one) there is nothing to find and the migration failed with
    "Found wrong number (0) of indexes" (django-taggit's 0006, wagtailcore's 0087). Such a
    lookup is answered with the name Django gives that index or constraint when it creates it:
    what a database those migrations built holds. Tables that exist are looked up as ever."""
    lookup = editor._constraint_names
    tables: set[str] | None = None

    def constraint_names(model: Any, column_names: Any = None, **conditions: Any) -> Any:
        nonlocal tables
        found = lookup(model, column_names, **conditions)
        unique, index = conditions.get("unique"), conditions.get("index")
        if found or not column_names or not (unique or index) or \
                any(conditions.get(k) for k in ("foreign_key", "check", "primary_key")):
            return found
        if tables is None:
            with editor.connection.cursor() as cursor:
                tables = set(editor.connection.introspection.table_names(cursor))
        table = model._meta.db_table
        if table in tables:
            return found
        # unique_together: "_uniq"; index_together: "_idx"; a field's db_index: no suffix
        suffix = "_uniq" if unique else "_idx" if len(column_names) > 1 else ""
        name = editor._create_index_name(table, list(column_names), suffix=suffix)
        log.debug("%s: no table in the database: %s assumed as Django names it", table, name)
        return [] if name in (conditions.get("exclude") or ()) else [name]

    editor._constraint_names = constraint_names


def _render_one(connection: Any, migration: Any, state: Any) -> tuple[Rendered, Any]:
    path, places = _operation_places(migration)
    rendered = Rendered(migration.app_label, migration.name, path, bool(migration.atomic))
    before = state.clone()
    try:
        # atomic=False: collecting SQL opens no transaction; the migration's own atomicity
        # is what the lint profile is told.
        with connection.schema_editor(collect_sql=True, atomic=False) as editor:
            _own_names(editor)
            state = migration.apply(state, editor, collect_sql=True)
    except Exception as exc:
        rendered.error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        log.warning("%s: cannot render its SQL: %s", rendered.label, rendered.error)
        return rendered, migration.mutate_state(before, preserve=False)
    lines: list[str] = []
    items = editor.collected_sql
    number = 0
    index = 0
    while index < len(items):
        item = str(items[index])
        if item == "--" and index + 2 < len(items) and str(items[index + 2]) == "--" and \
                str(items[index + 1]).startswith("-- "):
            number += 1
            description = str(items[index + 1])[3:]
            lines += [item, str(items[index + 1]), "--"]
            index += 3
            follows = str(items[index]) if index < len(items) else ""
            python = follows == "-- THIS OPERATION CANNOT BE WRITTEN AS SQL" and \
                not _noop(migration.operations[number - 1])
            writes = not python and follows != "-- (no-op)"
            line, col = places[number - 1] if number <= len(places) else (1, 1)
            rendered.operations.append(Operation(number, description, line, col,
                                                 len(lines) + 1, writes, python))
            continue
        lines += item.split("\n")
        index += 1
    rendered.sql = "\n".join(lines) + "\n"
    return rendered, state
