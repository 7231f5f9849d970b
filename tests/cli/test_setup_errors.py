"""A machine set up short of what a verb needs: one line naming what to install, at once.

psycopg without a libpq (``pgsteady[cli]`` where neither psycopg[binary] nor PostgreSQL's
client library is installed) is psycopg's own ImportError, made here as psycopg makes it:
its compiled builds absent and ``ctypes`` finding no ``libpq``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pgsteady

SRC = str(Path(pgsteady.__file__).resolve().parents[1])

NO_LIBPQ = ("import sys, ctypes.util\n"
            "sys.modules['psycopg_binary'] = sys.modules['psycopg_c'] = None\n"
            "_find = ctypes.util.find_library\n"
            "ctypes.util.find_library = lambda name: None if 'pq' in name else _find(name)\n")
HIDE = "import sys\nfor name in {hidden!r}: sys.modules[name] = None\n"
CLI = "from pgsteady._main import main\nsys.argv = ['pgsteady', *{argv!r}]\nsys.exit(main())\n"


def _run(prelude: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    env.pop("PSYCOPG_IMPL", None)
    return subprocess.run([sys.executable, "-c", prelude + CLI.format(argv=argv)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("argv", [
    ["--help"], ["migrate", "--help"], ["doctor", "--help"], ["lab", "--help"],
    ["blockers", "--dsn", "host=127.0.0.1 port=1"], ["--format", "json", "doctor", "--help"],
])
def test_without_libpq_every_verb_is_one_line_naming_binary(tmp_path, argv):
    """psycopg finds no libpq: exit 2, one stderr line naming pgsteady[binary] (it was psycopg's
    ImportError, 45 lines, even for --help)."""
    out = _run(NO_LIBPQ, argv, tmp_path)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith("pgsteady: error: ") and \
        "needs libpq, which is not installed: pip install 'pgsteady[binary]'" in lines[0]


def test_without_libpq_lint_still_lints(tmp_path):
    """lint never imports psycopg: it runs as before without a libpq."""
    (tmp_path / "001.sql").write_text("CREATE TABLE t (id int);\n")
    out = _run(NO_LIBPQ, ["lint", "--no-cache", "001.sql"], tmp_path)
    assert out.returncode == 0, out.stderr


def test_lab_lock_queue_without_uvicorn_fails_at_once(tmp_path):
    """`lab lock-queue` without the lab extra's uvicorn: exit 2 at once, one line naming
    pgsteady[lab] (it waited 60 s for replicas that could not start)."""
    start = time.monotonic()
    out = _run(HIDE.format(hidden=["uvicorn"]), ["lab", "lock-queue", "--dir", str(tmp_path)],
               tmp_path)
    assert time.monotonic() - start < 30
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert lines == ["pgsteady: error: pgsteady lab lock-queue needs uvicorn, which is not "
                     "installed: pip install 'pgsteady[lab]'"]
