"""The lint cache holds data only: files planted in ``.pgsteady_cache`` never run code, and an
entry that is not exactly what this code wrote is a miss that gets rewritten."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from pgsteady.cli import main
from pgsteady.lint import cache, cachedir, engine
from pgsteady.lint.engine import Linter
from pgsteady.lint.files import Unit

#: A migration folder that leaves findings (with and without a table), and a schema with
#: typed columns, a partitioned table, a view, an index, an enum and a search_path.
FILES = {
    "0001_users.sql": "CREATE TABLE users (id bigint PRIMARY KEY, name varchar(50), "
                      "tags text[], price numeric(10, 2));\n"
                      "CREATE TYPE mood AS ENUM ('sad', 'ok');\n"
                      "CREATE TABLE events (id bigint, at timestamptz) PARTITION BY RANGE (at);\n"
                      "CREATE TABLE events_2024 PARTITION OF events "
                      "FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');\n"
                      "CREATE VIEW named AS SELECT name FROM users;\n",
    "0002_index.sql": "CREATE INDEX users_name ON users (name);\n"
                      "ALTER TYPE mood ADD VALUE 'happy';\n",
    "0003_audit.sql": "CREATE SCHEMA audit;\nSET search_path = audit, public;\n"
                      "CREATE TABLE log (id int);\n"
                      "ALTER TABLE users ALTER COLUMN price TYPE numeric(12, 2);\n",
}
APPENDED = ("0004_more.sql", "ALTER TABLE users ALTER COLUMN name TYPE text;\n"
                             "ALTER TABLE users ADD COLUMN score int NOT NULL;\n")

#: Runs the real entry point (the warm path included) in a fresh process.
PROBE = ("import sys\nfrom pgsteady._main import main\nsys.argv = ['pgsteady', *sys.argv[1:]]\n"
         "code = main()\nsys.stdout.flush()\n"
         "sys.stderr.write('LOADED ' + ' '.join(m for m in ('argparse', 'pglast') "
         "if m in sys.modules) + '\\n')\nraise SystemExit(code)\n")


class _Planted:
    """Unpickling this writes the marker file: what a cache file in a pull request could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return exec, (f"open({str(self.marker)!r}, 'w').write('ran')",)


def settle(root: Path) -> None:
    """Date every file and folder under ``root`` ten seconds back, as files written before a
    run are: lint records no run that read a file written that instant (an edit after it was
    read could keep its modification time)."""
    for path in [root, *root.rglob("*")]:
        info = path.stat()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns - 10 * 10**9))


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project (pyproject.toml, migrations/) that is also the current directory."""
    (tmp_path / "pyproject.toml").write_text("[tool.pgsteady.lint]\n")
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    for name, text in FILES.items():
        (migrations / name).write_text(text)
    settle(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def entries(project: Path) -> list[Path]:
    return sorted(p for p in (project / ".pgsteady_cache" / "lint").iterdir()
                  if p.suffix in (".json", ".quick"))


def run_process(project: Path) -> tuple[int, str, str]:
    """(exit code, stdout, modules the probe saw) of a whole ``pgsteady lint`` process."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    done = subprocess.run([sys.executable, "-c", PROBE, "lint", "--format", "json",
                           "migrations"], capture_output=True, text=True, cwd=project,
                          timeout=60, check=False, env=env)
    return done.returncode, done.stdout, done.stderr.rpartition("LOADED")[2].strip()


def lint_json(capsys, *argv: str) -> tuple[int, str]:
    code = main(["lint", "--format", "json", *argv])
    return code, capsys.readouterr().out


def count_linted(monkeypatch) -> list[str]:
    linted: list[str] = []
    original = engine.Linter.lint_text

    def counting(self, text, path="<stdin>", **kwargs):
        linted.append(Path(path).name)
        return original(self, text, path, **kwargs)

    monkeypatch.setattr(engine.Linter, "lint_text", counting)
    return linted


def test_planted_pickles_never_run_and_are_replaced(project, capsys):
    """Pickles planted under every name the cache uses, old (.pickle, .marshal) and new, run
    nothing; lint reports as without a cache and rewrites the entries as data."""
    expected = lint_json(capsys, "--no-cache", "migrations")
    first = run_process(project)
    assert first[:2] == expected
    marker = project / "ran"
    planted = pickle.dumps(_Planted(marker))
    for entry in (project / ".pgsteady_cache" / "lint").iterdir():  # old names and new
        suffixes = (".quick", ".marshal") if entry.name.startswith("q-") else (".json",
                                                                              ".pickle")
        for suffix in suffixes:
            entry.with_suffix(suffix).write_bytes(planted)
    again = run_process(project)
    assert not marker.exists()
    assert again[:2] == expected and "pglast" in again[2]  # linted afresh
    assert not list(project.glob(".pgsteady_cache/lint/*.pickle"))
    assert not list(project.glob(".pgsteady_cache/lint/*.marshal"))
    for entry in entries(project):
        assert entry.read_bytes() != planted
    assert run_process(project) == (*expected, "")  # the rewritten entries serve the next run
    assert not marker.exists()


def _break_json(entry: Path, how: str) -> None:
    """Damage an entry as ``how`` says, signed again with the user's secret: the checks past
    the signature are what is tested."""
    with cachedir.open_folder(str(entry.parent), create=False) as folder:
        signed = folder.read(entry.name)
        assert signed is not None
        if how == "corrupt":
            folder.write(entry.name, signed[:40])
            return
        document = json.loads(signed)
        _damage(document, how)
        folder.write(entry.name, json.dumps(document).encode())


def _damage(document: dict, how: str) -> None:
    if how == "format":
        document["format"] = "pgsteady-lint-cache-1"
    elif how == "stamp":
        document["code"] = "0" * 32
    elif how == "key":
        document["key"] = "f" * 40
    elif how == "types":  # the envelope is right, a finding's line is a string
        for report in document["data"]["reports"]:
            for finding in report[3]:
                finding[1] = str(finding[1])
            report[1] = "many"


@pytest.mark.parametrize("how", ["corrupt", "format", "stamp", "key", "types"])
def test_entry_not_written_by_this_code_is_a_miss_and_rewritten(project, capsys,
                                                                 monkeypatch, how):
    """A cache entry that is damaged, of another format version or code stamp, under another
    key, or holding fields of the wrong type is ignored: every file is linted again, the
    report is unchanged and the entry is rewritten."""
    expected = lint_json(capsys, "--no-cache", "migrations")
    assert lint_json(capsys, "migrations") == expected
    written = {entry: entry.read_bytes() for entry in entries(project)}
    assert {e.name.startswith("s-") for e in written} == {True, False}  # both kinds
    for entry in written:
        _break_json(entry, how)
    linted = count_linted(monkeypatch)
    assert lint_json(capsys, "migrations") == expected
    assert linted == sorted(FILES)
    assert {entry: entry.read_bytes() for entry in entries(project)} == written


def test_cached_and_uncached_reports_are_identical(project, capsys, monkeypatch):
    """From the cache (whole, or the schema kept for an appended file) the JSON report is
    byte for byte the one an uncached run prints."""
    uncached = lint_json(capsys, "--no-cache", "migrations")
    assert lint_json(capsys, "migrations") == uncached
    assert lint_json(capsys, "migrations") == uncached
    name, text = APPENDED
    (project / "migrations" / name).write_text(text)
    uncached = lint_json(capsys, "--no-cache", "migrations")
    linted = count_linted(monkeypatch)
    assert lint_json(capsys, "migrations") == uncached
    assert linted == [name]  # the rest came from the cache, schema included
    assert "changing-column-type" not in uncached[1]  # varchar(50) -> text, known from 0001


def test_schema_and_reports_survive_the_json_entry(tmp_path):
    """What a run built (reports, every part of the schema) reads back equal from its entry."""
    linter = Linter()
    schema = linter.start()
    report = linter.lint_units([Unit(name, text) for name, text in FILES.items()],
                               schema=schema)
    assert schema.search_path == ("audit", "public") and schema.enums and schema.views
    store = cache.Cache(tmp_path)
    keys = ["a" * 40, "b" * 40, "c" * 40]  # one per file, as cache.chain gives them
    store.store(keys[-1], cache.Entry(report.files, schema))
    count, entry = store.longest(keys)
    assert count == 3 and entry is not None
    assert entry.reports == report.files and entry.schema == schema
    assert entry.schema.tables[("public", "users")].columns["price"].mods == (12, 2)
