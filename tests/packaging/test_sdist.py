"""The sdist carries the tests and what they read, so a packager can run them from it.

It shipped 1 of the 120-odd test files (setuptools' default takes ``tests/test*.py`` only);
MANIFEST.in grafts the tests, the example projects, the docs and the scripts they use."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _tracked(folder: str) -> set[str]:
    """The repository's files under ``folder`` (git's list; the folder's files without git)."""
    listed = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True,
                            text=True, check=False)
    if listed.returncode == 0 and listed.stdout.strip():
        return set(listed.stdout.split())
    return {str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_sdist_ships_every_test_and_what_the_tests_read(tmp_path):
    """Every tracked file under tests/ is in the sdist, with the example project, the docs
    site's sources and scripts/; no bytecode."""
    # a copy without build leftovers: an egg-info's SOURCES.txt from an earlier build would
    # put its files in whatever MANIFEST.in says
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", "*.egg-info", "build", "dist", "__pycache__", ".*_cache", ".pg"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    built = subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir",
                            str(tmp_path / "dist"), str(source)], capture_output=True,
                           text=True, timeout=600, check=False, env=env)
    assert built.returncode == 0, built.stderr[-3000:]
    (sdist,) = (tmp_path / "dist").glob("pgsteady-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    wanted = _tracked("tests")
    assert len([n for n in wanted if Path(n).name.startswith("test_")]) > 100
    assert sorted(wanted - names) == []
    for needed in ("examples/django/manage.py", "docs/django.md", "mkdocs.yml",
                   "scripts/lint_snapshot.py", ".pre-commit-hooks.yaml"):
        assert needed in names
    assert not [n for n in names if n.endswith(".pyc") or "__pycache__" in n]
