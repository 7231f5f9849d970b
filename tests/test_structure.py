"""The tree is the architecture: no import circle among pgsteady's modules, no module over
700 lines, and the arrows DESIGN.md draws (lint and migrate never import each other; guards
know no runner; nothing imports the command line)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "pgsteady"
MAX_LINES = 700
# Known and owned elsewhere: sim parses durations with the command line's parser (another
# change moves that parser to settings).
KNOWN_UPWARD = {("pgsteady.sim.phase_map", "pgsteady.cli._args")}


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _top_level_imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules ``name`` imports when it is imported: its top-level statements
    (and ``try`` / plain ``if`` blocks; ``if TYPE_CHECKING:`` is not run). ``from pkg import
    mod`` counts as an import of ``mod`` only."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _executed(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            subs = {f"{module}.{a.name}" for a in node.names} & known
            found |= subs
            if len(subs) < len(node.names):
                found.add(module)
    return found & known


def _executed(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            test = node.test
            if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
                out += _executed(node.orelse)
                continue
            out += _executed(node.body) + _executed(node.orelse)
        elif isinstance(node, ast.Try):
            out += _executed(node.body) + [s for h in node.handlers for s in _executed(h.body)]
            out += _executed(node.orelse) + _executed(node.finalbody)
        else:
            out.append(node)
    return out


@functools.cache
def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _top_level_imports(name, path, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_no_import_circle():
    """No module imports itself through others at import time (top-level imports)."""
    assert _cycles(_graph()) == []


def test_the_circle_finder_finds_a_circle():
    """The check above can fail: a made-up circle of three is found, a chain is not."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_module_over_700_lines():
    """A module over ~600 lines is asking to be split; none may pass 700."""
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def _imports_of(prefix: str) -> set[tuple[str, str]]:
    return {(name, target) for name, targets in _graph().items()
            if name == prefix or name.startswith(prefix + ".") for target in targets}


def test_arrows_point_down():
    """lint and migrate never import each other; sql and tools import neither (nor the
    runners, psycopg's side); guards know no runner; nothing but the command line imports
    it."""
    def into(source: str, *targets: str) -> set[tuple[str, str]]:
        return {(a, b) for a, b in _imports_of(source)
                if any(b == t or b.startswith(t + ".") for t in targets)}

    assert into("pgsteady.lint", "pgsteady.migrate") == set()
    assert into("pgsteady.migrate", "pgsteady.lint") == set()
    assert into("pgsteady.sql", "pgsteady.lint", "pgsteady.migrate", "pgsteady.tools") == set()
    assert into("pgsteady.tools", "pgsteady.lint", "pgsteady.migrate", "pgsteady.sql") == set()
    assert into("pgsteady.guards", "pgsteady.runner", "pgsteady.arunner") == set()
    outside = {(a, b) for a, targets in _graph().items() if not a.startswith("pgsteady.cli")
               and a != "pgsteady._main" for b in targets if b.startswith("pgsteady.cli")}
    assert outside <= KNOWN_UPWARD


def _tool_name_branches(tree: ast.AST, names: frozenset[str]) -> list[int]:
    """Lines of ``tree`` comparing something with a tool's name written as a string literal
    (``tool == "flyway"``, ``runner in ("popx", "sqitch")``)."""
    def literals(node: ast.expr) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return {e.value for e in node.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        return set()

    return sorted(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
                  and any(literals(side) & names for side in (node.left, *node.comparators)))


def test_only_tools_knows_a_tool():
    """No module outside tools/ branches on a tool's name (a comparison with one written as
    a string): what differs between tools is a hook of its Tool, so adding a tool is its
    module and its registry line."""
    from pgsteady.tools import registry

    names = frozenset(registry.MODULES) - {"plain"}  # "plain" is also an ordinary word
    found = {}
    for name, path in _modules().items():
        if name.startswith("pgsteady.tools") or name.startswith("pgsteady.django"):
            continue  # tools/ is where tools are known; django/ is the Django tool's own
        lines = _tool_name_branches(ast.parse(path.read_text(encoding="utf-8")), names)
        if lines:
            found[name] = lines
    assert found == {}


def test_the_tool_branch_finder_finds_one():
    """The check above can fail: a comparison with a tool's name is found, others are not."""
    code = ('if layout == "flyway": pass\nif tool in ("goose", "tern"): pass\n'
            'if name == "other": pass\nx = "flyway"\n')
    assert _tool_name_branches(ast.parse(code), frozenset({"flyway", "goose"})) == [1, 2]
