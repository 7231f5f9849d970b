"""The tree is the architecture: no import circle among pgsteady's modules (not even for the
type checker), no module over 600 lines, the arrows DESIGN.md draws (lint and migrate never
import each other; guards know no runner; nothing imports the command line), PostgreSQL
version gates only in ``_majors``, lint rules handed their ALTER TABLE subcommands, a lab
scenario as its modules and one registry line, and no dead names."""

from __future__ import annotations

import ast
import functools
import importlib
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "pgsteady"
MAX_LINES = 600
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


def _top_level_imports(name: str, path: Path, known: set[str], *,
                       typing: bool = False) -> set[str]:
    """The package's modules ``name`` imports when it is imported: its top-level statements
    (and ``try`` / plain ``if`` blocks; ``if TYPE_CHECKING:`` is not run). ``from pkg import
    mod`` counts as an import of ``mod`` only."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _executed(ast.parse(path.read_text(encoding="utf-8")).body, typing=typing):
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


def _executed(body: list[ast.stmt], *, typing: bool = False) -> list[ast.stmt]:
    """The statements run on import (with ``typing``: the type checker's imports too)."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            test = node.test
            if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" and not typing:
                out += _executed(node.orelse)
                continue
            out += _executed(node.body, typing=typing) + _executed(node.orelse, typing=typing)
        elif isinstance(node, ast.Try):
            out += _executed(node.body, typing=typing)
            out += [s for h in node.handlers for s in _executed(h.body, typing=typing)]
            out += _executed(node.orelse, typing=typing) + _executed(node.finalbody,
                                                                    typing=typing)
        else:
            out.append(node)
    return out


@functools.cache
def _graph(typing: bool = False) -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _top_level_imports(name, path, known, typing=typing)
            for name, path in modules.items()}


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


def test_no_import_circle_even_for_the_type_checker():
    """Nor through imports made only for type checking (``if TYPE_CHECKING:``): two modules
    that need each other's types share a protocol instead (``_health_serve.Probed``)."""
    assert _cycles(_graph(typing=True)) == []


def test_the_circle_finder_finds_a_circle():
    """The check above can fail: a made-up circle of three is found, a chain is not."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_module_over_600_lines():
    """A module over 600 lines is asking to be split: none passes it."""
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


MAJORS = "pgsteady._majors"
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_POSTGRES_VERSION = re.compile(r"pg_version|major|server_version|version_num")


def _bare_version_comparisons(tree: ast.AST) -> list[str]:
    """Comparisons that gate on a PostgreSQL version by hand: an ordering (``<``, ``>=``)
    whose side names a PostgreSQL version or a major (a migration's version is not one), a ``server_version_num``-form literal
    (``140000``), or a ``// 10000`` conversion."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(isinstance(op, _ORDERING) for op in node.ops):
            sides = [node.left, *node.comparators]
            text = " ".join(ast.unparse(side) for side in sides).lower()
            literal = any(isinstance(s, ast.Constant) and type(s.value) is int
                          and 90000 <= s.value < 1000000 and s.value % 10000 == 0
                          for s in sides)
            if _POSTGRES_VERSION.search(text) or literal:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and \
                isinstance(node.right, ast.Constant) and node.right.value == 10000:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_version_gates_ask_the_majors_module():
    """Every PostgreSQL version gate asks pgsteady._majors (``supports(major, FEATURE)``);
    no module compares versions or majors itself, in either number form."""
    bare = {name: found for name, path in _modules().items() if name != MAJORS
            and (found := _bare_version_comparisons(ast.parse(path.read_text("utf-8"))))}
    assert bare == {}


def test_the_version_gate_finder_finds_bare_gates():
    """The check above can fail: each hand-made gate is found, a call to supports() is not."""
    for source in ("ok = major >= 14", "ok = snap.version_num >= 140000", "ok = n < 140000",
                   "m = server_version_num // 10000", "ok = 12 <= ctx.pg_version"):
        assert _bare_version_comparisons(ast.parse(source)), source
    assert not _bare_version_comparisons(ast.parse(
        "ok = _majors.supports(major, _majors.REINDEX_CONCURRENTLY) and n < 14"))


def test_the_majors_module_is_free_to_import():
    """pgsteady._majors imports nothing of pgsteady's (lint, sql, lab and inspect all read
    it at start-up), and the install script pins exactly the majors it names."""
    from pgsteady import _majors

    assert _graph()[MAJORS] == set()
    script = (PACKAGE.parents[1] / "scripts" / "postgres-versions.sh").read_text("utf-8")
    pinned = {int(m) for m in re.findall(r"^\s+\[(\d+)\]=", script, re.MULTILINE)}
    assert pinned == set(_majors.PAST_END_OF_LIFE + _majors.SUPPORTED)
    default = re.search(r"majors=\(([\d ]+)\)", script)
    assert default is not None
    assert {int(m) for m in default[1].split()} == pinned


def test_lint_rules_are_handed_their_alter_table_subcommands():
    """A rule about ALTER TABLE subcommands declares COMMANDS and is handed each one; only a
    rule that also looks at other statements walks an ALTER TABLE's subcommands itself."""
    walking = {path.stem for path in (PACKAGE / "lint" / "rules").glob("*.py")
               if "alter_commands(" in path.read_text("utf-8")}
    assert walking <= {"concurrently_in_transaction"}


def test_a_lab_scenario_is_its_modules_and_one_registry_line():
    """Every registered scenario's module declares that name and has its HTML section
    beside it; the report finds sections through the registry alone (it imports nothing
    else of the lab)."""
    from pgsteady.lab.scenarios import registry

    for name, module in registry.MODULES.items():
        assert f"{module}_html" in _modules(), f"{name}: no {module}_html beside it"
        assert importlib.import_module(module).SCENARIO.name == name
        assert registry.html_section(name) is not None
    lab = {(a, b) for a, b in _imports_of("pgsteady.report") if b.startswith("pgsteady.lab")}
    assert lab <= {("pgsteady.report.page", "pgsteady.lab.scenarios.registry")}
    assert _graph()["pgsteady.lab.scenarios.registry"] == set()


# Names nothing mentions by name but something calls: a decorator registers it (atexit),
# a framework finds it (Django's AppConfig, pytest's hooks).
CALLED_BY_NAME = {"pgsteady.lab.cluster._stop_leftovers", "pgsteady.django.apps.PgsteadyConfig",
                  "pgsteady.testing.plugin.pytest_configure",
                  "pgsteady.testing.plugin.pytest_report_header",
                  "pgsteady.testing.plugin.pytest_generate_tests",
                  "pgsteady.django.checks.settings_checks"}


def _top_level_names(tree: ast.Module) -> Iterator[str]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                yield from (e.id for e in elements if isinstance(e, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id


def test_no_dead_names():
    """Every module-level function, class and constant is mentioned somewhere besides its
    definition (code, tests, benches, scripts, examples or docs): nothing is left dead."""
    root = PACKAGE.parents[1]
    texts = [p.read_text("utf-8") for folder in ("src", "tests", "bench", "scripts", "examples")
             for p in (root / folder).rglob("*.py")]
    texts += [p.read_text("utf-8") for p in [*(root / "docs").rglob("*.md"), root / "README.md"]]
    words = Counter(w for text in texts for w in re.findall(r"[A-Za-z_]\w*", text))
    dead = {f"{module}.{name}" for module, path in _modules().items()
            for name in _top_level_names(ast.parse(path.read_text("utf-8")))
            if not name.startswith("__") and words[name] <= 1}
    assert dead <= CALLED_BY_NAME, sorted(dead - CALLED_BY_NAME)


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


def test_test_modules_have_names_of_their_own():
    """pytest imports test modules by their file name (rootdir-relative, no packages): two
    files of one name in different folders stop the whole run at collection."""
    tests = Path(__file__).resolve().parent
    names = Counter(p.name for p in tests.rglob("*.py")
                    if p.name not in ("__init__.py", "conftest.py")
                    and "cases" not in p.relative_to(tests).parts)
    assert [name for name, n in names.items() if n > 1] == []
