"""The published pre-commit hook lints all of a commit's SQL files in one run.

pre-commit splits a hook's file list across parallel processes unless the hook says
``require_serial``; lint replays earlier files' schema to judge later ones (a column's type,
a table made in the same change), so a file linted apart from its history gets findings a
whole run does not (193 where one run gave 191). The split here is pre-commit's own
(``pre_commit.lang_base.run_xargs``), with its concurrency set to 4 whatever the machine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import pgsteady

pre_commit = pytest.importorskip("pre_commit.lang_base")
yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
SRC = str(Path(pgsteady.__file__).resolve().parents[1])
FILES = {
    "001_table.sql": "CREATE TABLE t (id int, name varchar(10));\n",
    "002_widen.sql": "ALTER TABLE t ALTER COLUMN name TYPE varchar(20);\n",  # safe: widening
    "003_check.sql": "ALTER TABLE t ADD CONSTRAINT c CHECK (id > 0);\n",
    "004_index.sql": "CREATE INDEX t_name ON t (name);\n",
}


def _hook() -> dict[str, object]:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    return next(h for h in hooks if h["id"] == "pgsteady-lint")


def test_hook_runs_serially_and_finds_what_one_run_finds(tmp_path, monkeypatch):
    """Through pre-commit's xargs with 4 parallel jobs, the hook's findings are one run's: the
    widened varchar (known from 001) is not reported as a possible rewrite."""
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", SRC)
    monkeypatch.setattr(pre_commit, "target_concurrency", lambda: 4)
    hook = _hook()
    entry = str(hook["entry"]).split()
    assert entry[0] == "pgsteady"
    cmd = (sys.executable, "-m", "pgsteady", *entry[1:], "--no-cache",
           *[str(a) for a in hook.get("args", [])])  # type: ignore[union-attr]
    names = sorted(FILES)
    _, whole = pre_commit.run_xargs(cmd, names, require_serial=True, color=False)
    _, hooked = pre_commit.run_xargs(cmd, names, require_serial=bool(hook["require_serial"]),
                                     color=False)
    findings = [line for line in hooked.decode().splitlines() if ".sql:" in line]
    assert findings == [line for line in whole.decode().splitlines() if ".sql:" in line]
    assert not [line for line in findings if "changing-column-type" in line]
    assert len(findings) == 2  # the CHECK without NOT VALID, the index without CONCURRENTLY
