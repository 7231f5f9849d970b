"""The parser loaded without pglast's AST classes, and pglast still whole for later users."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from pgsteady.sql import pglast_loader
parser = pglast_loader.parser()
assert parser.split("SELECT 1; SELECT 2", only_slices=True) == (slice(0, 8), slice(10, 18))
assert '"SelectStmt"' in parser.parse_sql_json("SELECT 1")
print("deferred", "RawStmt" in vars(sys.modules["pglast.ast"]),
      "AlterTableType" in vars(sys.modules["pglast.enums"]))
import pglast
from pglast import enums, parse_sql, prettify
stmt = parse_sql("ALTER TABLE t ADD COLUMN c int")[0].stmt
assert type(stmt).__name__ == "AlterTableStmt"
assert stmt.cmds[0].subtype == enums.AlterTableType.AT_AddColumn
assert prettify("select a from b") == "SELECT a\\nFROM b"
assert pglast.__version__.startswith("v")
assert pglast_loader.parser() is sys.modules["pglast.parser"]
from pgsteady.sql.analysis import analyze
assert analyze("ALTER TABLE t ADD COLUMN c int")[0].kind.startswith("ALTER TABLE")
print("whole")
"""


def test_parser_first_then_pglast_in_full():
    """The C parser works with pglast's AST and enums not yet run; then parse_sql, the
    enums, prettify and migrate's analysis work in the same process as if imported whole."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["deferred False False", "whole"]


def test_already_imported_pglast_is_used_as_is():
    """With pglast imported already, the loader hands back its parser."""
    import pglast.parser

    from pgsteady.sql import pglast_loader

    assert pglast_loader.parser() is pglast.parser


THREADS = """
import sys, threading
from pgsteady.sql import pglast_loader
pglast_loader.parser()
import pglast
barrier = threading.Barrier(8)
errors = []

def use():
    barrier.wait()
    try:
        assert pglast.enums.AlterTableType.AT_AddColumn == 0
        assert pglast.ast.RawStmt.__name__ == "RawStmt"
        assert pglast.parse_sql("SELECT 1")[0].stmt is not None
    except BaseException as exc:
        errors.append(repr(exc))

workers = [threading.Thread(target=use) for _ in range(8)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join(timeout=60)
print(errors)
"""


def test_first_use_from_many_threads_at_once():
    """Threads reading the deferred modules at the same moment all get the real ones."""
    done = subprocess.run([sys.executable, "-c", THREADS], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_cold_lint_runs_without_pglast_ast_or_the_cache_modules(tmp_path):
    """A plain ``lint --no-cache`` leaves pglast's AST and enums unrun and imports neither
    hashlib nor pickle: start-up is most of a small lint."""
    sql = tmp_path / "0001.sql"
    sql.write_text("CREATE INDEX i ON t (c);\nALTER TABLE t ADD COLUMN d int;\n")
    probe = ("import sys\nfrom pgsteady.cli import main\n"
             "code = main(['lint', '--no-cache', sys.argv[1]])\n"
             "ast, enums = sys.modules['pglast.ast'], sys.modules['pglast.enums']\n"
             "print(code, 'RawStmt' in vars(ast), 'AlterTableType' in vars(enums), "
             "'hashlib' in sys.modules, 'pickle' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(sql)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.stdout.split("\n")[-2] == "1 False False False False", done.stderr
