"""The warm path: a repeated ``pgsteady lint`` process prints the recorded output, and any
change to what the run read (a file, a folder, the configuration, the arguments) is a miss."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RISKY = "CREATE INDEX orders_status ON orders (status);\n"

#: Runs the real entry point, then says on stderr whether the command line was loaded.
PROBE = ("import sys\nfrom pgsteady._main import main\nsys.argv = ['pgsteady', *sys.argv[1:]]\n"
         "code = main()\nsys.stdout.flush()\n"
         "sys.stderr.write('LOADED ' + ' '.join(m for m in ('argparse', 'pglast', "
         "'pgsteady.cli') if m in sys.modules) + '\\n')\nraise SystemExit(code)\n")


def settle(root: Path) -> None:
    """Date every file and folder under ``root`` ten seconds back, as files written before a
    run are: lint records no run that read a file written that instant (an edit after it was
    read could keep its modification time)."""
    for path in [root, *root.rglob("*")]:
        info = path.stat()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns - 10 * 10**9))


@pytest.fixture
def project(tmp_path):
    """A project with pyproject.toml and migrations/ holding two files."""
    (tmp_path / "pyproject.toml").write_text("[tool.pgsteady.lint]\n")
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "0001_users.sql").write_text("CREATE TABLE users (id bigint PRIMARY KEY);\n")
    (migrations / "0002_index.sql").write_text(RISKY)
    settle(tmp_path)
    return tmp_path


def run(project: Path, *argv: str) -> tuple[int, str, str, str]:
    """(exit code, stdout, stderr without the probe's line, modules the probe saw)."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    done = subprocess.run([sys.executable, "-c", PROBE, "lint", *argv], capture_output=True,
                          text=True, cwd=project, timeout=60, check=False, env=env)
    err, _, loaded = done.stderr.rpartition("LOADED")
    return done.returncode, done.stdout, err, loaded.strip()


def touch_later(path: Path) -> None:
    """Move a file's modification time on, as a later edit would."""
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))


def test_repeated_run_prints_the_same_without_loading_the_command_line(project):
    """The second identical run gives the same code, stdout and stderr, and imports neither
    argparse, the command line nor the parser."""
    code, out, err, loaded = run(project, "migrations")
    assert code == 1 and "require-concurrent-index-creation" in out
    assert "pglast" in loaded
    assert run(project, "migrations") == (code, out, err, "")
    assert list((project / ".pgsteady_cache" / "lint").glob("q-*.quick"))


def test_edited_file_is_a_miss(project):
    """Fixing the risky file shows at once."""
    run(project, "migrations")
    path = project / "migrations" / "0002_index.sql"
    path.write_text("SELECT 1;\n")
    touch_later(path)
    code, out, _, loaded = run(project, "migrations")
    assert (code, out) == (0, "") and "argparse" in loaded


def test_new_file_is_a_miss(project):
    """A file added to the folder is linted."""
    run(project, "migrations")
    (project / "migrations" / "0003_drop.sql").write_text("DROP TABLE users;\n")
    code, out, _, _ = run(project, "migrations")
    assert code == 1 and "ban-drop-table" in out


def test_changed_configuration_is_a_miss(project):
    """Turning a rule off in pyproject.toml takes effect on the next run."""
    run(project, "migrations")
    config = project / "pyproject.toml"
    config.write_text('[tool.pgsteady.lint]\ndisable = ["require-concurrent-index-creation"]\n')
    touch_later(config)
    code, out, _, _ = run(project, "migrations")
    assert code == 0 and "require-concurrent-index-creation" not in out


def test_other_arguments_are_their_own_entry(project):
    """--format json after a text run prints JSON, and each is then replayed as itself."""
    text = run(project, "migrations")
    as_json = run(project, "--format", "json", "migrations")
    assert as_json[1].startswith("{") and as_json[1] != text[1]
    assert run(project, "migrations") == (*text[:3], "")
    assert run(project, "--format", "json", "migrations") == (*as_json[:3], "")


def test_damaged_entry_is_a_miss(project):
    """A garbled entry is ignored and replaced, never an error."""
    first = run(project, "migrations")
    for entry in (project / ".pgsteady_cache" / "lint").glob("q-*.quick"):
        entry.write_bytes(b"\x00garbage")
    again = run(project, "migrations")
    assert again[:3] == first[:3] and "argparse" in again[3]
    assert run(project, "migrations") == (*first[:3], "")


def test_no_cache_and_syntax_errors_record_nothing(project):
    """--no-cache runs and runs with a file that does not parse are never replayed."""
    run(project, "--no-cache", "migrations")
    assert not (project / ".pgsteady_cache").exists()
    (project / "migrations" / "0003_bad.sql").write_text("CREATE TABEL x ();\n")
    first = run(project, "migrations")
    assert first[0] == 2
    again = run(project, "migrations")
    assert again[:3] == first[:3] and "argparse" in again[3]



def test_the_code_stamp_covers_every_module_a_recorded_run_depends_on():
    """An edit to any module whose code shapes a lint's findings or output misses the cache:
    lint's and its rules', migrate's layouts, the records and SQL text helpers at the top of
    the package (their records are stored in the cache) and the command line's."""
    from pgsteady.lint import quick

    stamped = {part.split(":")[0] for part in quick.code_stamp().split(";") if part}
    assert {"engine.py", "ban_drop_table.py", "registry.py", "_record.py", "text.py",
            "lint.py"} <= stamped
