"""The wheel, installed in clean virtual environments, works as the docs say.

``pip install pgsteady`` is the runtime alone (with ``psycopg[binary]`` beside it, as an
application picks its psycopg): ``pgsteady.Database`` imports, the pytest plugin loads, and
``pgsteady lint`` is one line naming ``pip install 'pgsteady[cli]'`` (exit 2). With
``pgsteady[cli]`` every verb's ``--help`` answers and ``pgsteady lint`` lints. Both venvs get
packages from the index pip is configured with (CI: PyPI); slow, about a minute on PyPI.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgsteady.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(argv: list[str | Path], cwd: Path | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    # the venv's own packages only: not this checkout's (the test runs with src on the path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) \
        -> Iterator[tuple[str, ...]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path
        return
    for name, sub in subs[0].choices.items():
        yield from _leaves(sub, (*path, name))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pgsteady's wheel, built from this checkout (no dependencies)."""
    out = tmp_path_factory.mktemp("dist")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, ROOT])
    assert built.returncode == 0, built.stderr[-3000:]
    (whl,) = out.glob("pgsteady-*.whl")
    return whl


def _venv(where: Path, *requirements: str) -> Path:
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    installed = _run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                      *requirements])
    assert installed.returncode == 0, installed.stderr[-3000:]
    return python


def test_the_core_wheel_is_the_runtime_and_points_at_the_cli_extra(wheel, tmp_path):
    """Wheel + psycopg[binary] only: the runtime imports, rich and pglast are absent, and `pgsteady lint` is one line with the extra to install, exit 2."""
    python = _venv(tmp_path / "core", str(wheel), "psycopg[binary]")
    probe = _run([python, "-c",
                  "import importlib.util, pgsteady\n"
                  "from pgsteady.guards import StaleCache\nfrom pgsteady.health import Health\n"
                  "print(pgsteady.Database.__name__, pgsteady.AsyncDatabase.__name__, "
                  "[m for m in ('pglast', 'rich', 'orjson', 'pygments') "
                  "if importlib.util.find_spec(m)])"])
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "Database AsyncDatabase []"
    lint = _run([python.parent / "pgsteady", "lint", "migrations"], cwd=tmp_path)
    assert lint.returncode == 2, lint.stderr
    assert lint.stderr.strip().splitlines() == [
        "pgsteady: error: pgsteady lint needs pglast, rich, orjson, which are not installed: "
        "pip install 'pgsteady[cli]'"]


def test_with_the_cli_extra_every_verb_answers(wheel, tmp_path):
    """Wheel[cli] + psycopg[binary]: every verb's --help exits 0, and lint lints a file."""
    python = _venv(tmp_path / "cli", f"pgsteady[cli] @ {wheel.as_uri()}", "psycopg[binary]")
    pgsteady = python.parent / "pgsteady"
    for path in _leaves(build_parser()):
        helped = _run([pgsteady, *path, "--help"], cwd=tmp_path, timeout=60)
        assert helped.returncode == 0, (path, helped.stderr)
        assert "usage: pgsteady" in helped.stdout
    (tmp_path / "0001_index.sql").write_text("CREATE INDEX i ON t (c);\n")
    lint = _run([pgsteady, "lint", "--no-cache", "0001_index.sql"], cwd=tmp_path, timeout=60)
    assert lint.returncode == 1, lint.stderr
    assert "require-concurrent-index-creation" in lint.stdout
