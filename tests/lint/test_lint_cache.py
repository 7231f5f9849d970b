"""The content-hash cache: warm runs skip the parser, appended files alone are linted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pgsteady.cli import main
from pgsteady.lint import engine

RISKY = "CREATE INDEX orders_status ON orders (status);\n"


def settle(root: Path) -> None:
    """Date every file and folder under ``root`` ten seconds back, as files written before a
    run are: lint records no run that read a file written that instant (an edit after it was
    read could keep its modification time)."""
    for path in [root, *root.rglob("*")]:
        info = path.stat()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns - 10 * 10**9))


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """migrations/ with two files, the current directory being tmp_path (the cache's home)."""
    monkeypatch.chdir(tmp_path)
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "0001_users.sql").write_text(
        "CREATE TABLE users (id bigint PRIMARY KEY, name varchar(50));\n")
    (migrations / "0002_index.sql").write_text(RISKY)
    settle(tmp_path)
    return migrations


def lint(capsys, *argv: str) -> tuple[int, str]:
    code = main(["lint", *argv])
    return code, capsys.readouterr().out


def count_linted(monkeypatch) -> list[str]:
    linted: list[str] = []
    original = engine.Linter.lint_text

    def counting(self, text, path="<stdin>", **kwargs):
        linted.append(Path(path).name)
        return original(self, text, path, **kwargs)

    monkeypatch.setattr(engine.Linter, "lint_text", counting)
    return linted


def test_warm_run_gives_the_same_report_without_linting(folder, capsys, monkeypatch):
    """The second run prints the same findings and lints no file."""
    first = lint(capsys, "migrations")
    linted = count_linted(monkeypatch)
    assert lint(capsys, "migrations") == first
    assert linted == []
    assert first[0] == 1 and "require-concurrent-index-creation" in first[1]
    assert (folder.parent / ".pgsteady_cache" / ".gitignore").read_text().endswith("*\n")


def test_appended_file_alone_is_linted_with_the_schema_kept(folder, capsys, monkeypatch):
    """A new file after a cached run is linted alone, knowing the old column type."""
    lint(capsys, "migrations")
    (folder / "0003_type.sql").write_text("ALTER TABLE users ALTER COLUMN name TYPE text;\n")
    linted = count_linted(monkeypatch)
    code, out = lint(capsys, "migrations")
    assert linted == ["0003_type.sql"]
    assert "changing-column-type" not in out  # varchar(50) -> text, known from 0001
    assert "require-concurrent-index-creation" in out and code == 1


def test_changed_file_is_linted_again(folder, capsys, monkeypatch):
    """Editing a file invalidates the cache from there: the fix shows at once."""
    assert lint(capsys, "migrations")[0] == 1
    (folder / "0002_index.sql").write_text("SELECT 1;\n")
    linted = count_linted(monkeypatch)
    assert lint(capsys, "migrations") == (0, "")
    assert linted == ["0001_users.sql", "0002_index.sql"]


def test_no_cache_writes_nothing(folder, capsys):
    """--no-cache neither reads nor writes .pgsteady_cache."""
    lint(capsys, "--no-cache", "migrations")
    assert not (folder.parent / ".pgsteady_cache").exists()


def test_damaged_entry_is_a_miss(folder, capsys):
    """A garbled cache file is ignored and replaced, never an error."""
    first = lint(capsys, "migrations")
    for entry in (folder.parent / ".pgsteady_cache" / "lint").glob("*.json"):
        entry.write_bytes(b"not json")
    assert lint(capsys, "migrations") == first


def test_plain_lint_imports_no_psycopg_rich_or_database_layer(folder):
    """A lint run (cold, then warm) imports neither psycopg, rich nor the runners; warm
    runs do not import the parser either."""
    probe = ("import sys\nfrom pgsteady.cli import main\ncode = main(['lint', 'migrations'])\n"
             "print(sorted(m for m in ('psycopg', 'rich', 'psycopg_pool', 'pglast', "
             "'pgsteady.runner', 'pgsteady.migrate.apply') if m in sys.modules))\n")
    cold = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=folder.parent, timeout=60, check=True).stdout
    warm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=folder.parent, timeout=60, check=True).stdout
    assert cold.splitlines()[-1] == "['pglast']"
    assert warm.splitlines()[-1] == "[]"


def test_cold_lint_process_skips_logging_toml_and_shutil(folder):
    """A whole ``pgsteady lint`` process in a project whose pyproject.toml has no section of
    ours loads neither logging, tomllib, shutil nor dataclasses (and with it inspect): start-up
    a pre-commit hook waits for; with ``-vv`` logging is configured and the cache's debug
    lines reach stderr."""
    (folder.parent / "pyproject.toml").write_text("[project]\nname = 'app'\n[broken\n")
    probe = ("import sys\nsys.argv = ['pgsteady', *sys.argv[1:]]\n"
             "from pgsteady._main import main\ncode = main()\n"
             "print(sorted(m for m in ('logging', 'tomllib', 'shutil', 'dataclasses', "
             "'inspect', 'typing') if m in sys.modules))\n"
             "raise SystemExit(code)\n")
    run = subprocess.run([sys.executable, "-c", probe, "lint", "--no-cache", "migrations"],
                         capture_output=True, text=True, cwd=folder.parent, timeout=60,
                         check=False)
    assert run.returncode == 1, run.stderr  # the risky index is found
    assert run.stdout.splitlines()[-1] == "[]"
    (folder.parent / ".pgsteady_cache").mkdir()
    (folder.parent / ".pgsteady_cache" / "lint").write_text("a file: no cache folder here")
    verbose = subprocess.run([sys.executable, "-c", probe, "-vv", "lint", "migrations"],
                             capture_output=True, text=True, cwd=folder.parent, timeout=60,
                             check=False)
    assert verbose.stdout.splitlines()[-1] == "['logging']"
    assert "pgsteady.lint: " in verbose.stderr


def test_untouched_files_skip_even_reading(folder, capsys, monkeypatch):
    """With nothing touched since the last run, no file is read or detected; touching one
    file (same content) falls back to the content cache and still lints nothing."""
    from pgsteady.lint import runners

    first = lint(capsys, "migrations")
    loaded: list[int] = []
    original = runners.load
    monkeypatch.setattr(runners, "load", lambda files, runner, heads=None: loaded.append(1)
                        or original(files, runner, heads))
    linted = count_linted(monkeypatch)
    assert lint(capsys, "migrations") == first
    assert loaded == [] and linted == []
    path = folder / "0002_index.sql"
    path.write_text(path.read_text())  # new modification time, same content
    os.utime(path, ns=(1, 1))
    assert lint(capsys, "migrations") == first
    assert loaded == [1] and linted == []
