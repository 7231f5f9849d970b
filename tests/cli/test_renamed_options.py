"""``--tool`` is the one name of a migration tool on lint, migrate and preflight; ``--runner``
and ``--layout`` still work for a while, saying so in one line on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pgsteady.cli import main

NOTE = "note: {old} is now --tool; {old} will be removed in a later release"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "pgsteady", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False, timeout=60)


def test_lint_runner_is_tool_with_a_note(tmp_path, capsys):
    """lint --runner NAME lints as --tool NAME (the same JSON) and notes the new name once."""
    (tmp_path / "a.sql").write_text("CREATE INDEX i ON t (a);\n")
    assert main(["lint", "--no-cache", "--format", "json", "--tool", "plain",
                 str(tmp_path / "a.sql")]) == 1
    new = capsys.readouterr()
    assert main(["lint", "--no-cache", "--format", "json", "--runner", "plain",
                 str(tmp_path / "a.sql")]) == 1
    old = capsys.readouterr()
    assert json.loads(old.out) == json.loads(new.out)
    assert json.loads(new.out)["summary"]["runner"] == "plain"
    assert old.err.splitlines() == [NOTE.format(old="--runner")]
    assert "note:" not in new.err


def test_lint_tool_in_the_config(tmp_path, capsys, monkeypatch):
    """`tool = "goose"` in [tool.pgsteady.lint] picks the profile; setting it twice (tool and
    its old name runner) is a usage error."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "1_a.sql").write_text("-- +goose Up\nSELECT 1;\n")
    (tmp_path / "pyproject.toml").write_text('[tool.pgsteady.lint]\ntool = "goose"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--no-cache", "m/1_a.sql"]) == 0
    assert "runner profile goose (from config)" in capsys.readouterr().err
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pgsteady.lint]\ntool = "goose"\nrunner = "goose"\n')
    assert main(["lint", "--no-cache", "m/1_a.sql"]) == 2
    assert "tool and runner (its old name) are both set" in capsys.readouterr().err


@pytest.mark.parametrize("verb", ["migrate", "preflight"])
def test_layout_is_tool_with_a_note(tmp_path, verb):
    """migrate/preflight --layout NAME acts as --tool NAME, after one note line."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "V1__a.sql").write_text("CREATE TABLE a (x int);\n")
    common = ("--dsn", "postgresql://app@127.0.0.1:1/x", "--dir", str(folder))
    new = _cli(verb, *common, "--tool", "goose", cwd=tmp_path)
    old = _cli(verb, *common, "--layout", "goose", cwd=tmp_path)
    assert new.returncode == old.returncode == 2
    assert old.stderr.splitlines() == [NOTE.format(old="--layout"), *new.stderr.splitlines()]


@pytest.mark.parametrize(("verb", "old"), [("lint", "--runner"), ("migrate", "--layout"),
                                           ("preflight", "--layout")])
def test_help_names_only_tool(verb, old, capsys):
    """--help shows --tool; the old spelling is not offered any more."""
    with pytest.raises(SystemExit):
        main([verb, "--help"])
    shown = capsys.readouterr().out
    assert "--tool" in shown and old not in shown
