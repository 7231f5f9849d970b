"""The migrate package has no import circle (issue 10: source.py reached back into apply.py
and preflight.py for the Alembic adapter)."""

from __future__ import annotations

import ast
from pathlib import Path

import pgsteady.migrate

PACKAGE = Path(pgsteady.migrate.__file__).parent


def _imports(path: Path) -> set[str]:
    """Modules of pgsteady.migrate that ``path`` imports, at the top or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "pgsteady.migrate":
                found |= {alias.name for alias in node.names}
            elif node.module.startswith("pgsteady.migrate."):
                found.add(node.module.split(".")[2])
    return found


def test_no_import_circle_between_migrate_modules():
    """Following imports from any module of pgsteady.migrate never leads back to it."""
    graph = {path.stem: _imports(path) for path in PACKAGE.glob("*.py")
             if path.stem != "__init__"}
    for start, imported in graph.items():
        seen, todo = set(), list(imported)
        while todo:
            module = todo.pop()
            assert module != start, f"{start} imports itself back through {sorted(seen)}"
            if module not in seen and module in graph:
                seen.add(module)
                todo += graph[module]
    assert "apply" not in graph["source"] and "preflight" not in graph["source"]
