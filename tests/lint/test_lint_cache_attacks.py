"""What a repository can carry in ``.pgsteady_cache`` never steers lint: links are never
followed (folders, entries, temporary files, the .gitignore), reads are bounded, a forged or
planted entry is a miss, ``--no-cache`` reads nothing, and a file edited during a run is never
replayed with the verdict of its old text."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from pgsteady import _main
from pgsteady.cli import main
from pgsteady.lint import cachedir, engine, quick, runners

RISKY = "CREATE INDEX orders_status ON orders (status);\n"
#: Runs the real entry point (the warm path included) in a fresh process.
PROBE = ("import sys\nfrom pgsteady._main import main\nsys.argv = ['pgsteady', *sys.argv[1:]]\n"
         "code = main()\nsys.stdout.flush()\n"
         "sys.stderr.write('LOADED ' + ' '.join(m for m in ('argparse', 'pglast') "
         "if m in sys.modules) + '\\n')\nraise SystemExit(code)\n")


@pytest.fixture(autouse=True)
def own_secret(tmp_path_factory, monkeypatch):
    """Each test has its own XDG cache folder, hence its own secret; the warm path's state
    (armed by in-process runs of the entry point) ends with the test."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.setattr(cachedir, "_SECRETS", {})
    for state in ("_ARMED", "_STARTED", "_STAMPED"):
        monkeypatch.setattr(quick, state, [])
    return home


@pytest.fixture
def project(tmp_path, monkeypatch):
    """pyproject.toml and migrations/ (one clean file, one risky index), dated ten seconds
    back, the current directory."""
    (tmp_path / "pyproject.toml").write_text("[tool.pgsteady.lint]\n")
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "0001_users.sql").write_text("CREATE TABLE users (id bigint PRIMARY KEY);\n")
    (migrations / "0002_index.sql").write_text(RISKY)
    for path in [tmp_path, *tmp_path.rglob("*")]:
        info = path.stat()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns - 10 * 10**9))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(project: Path, *argv: str, timeout: float = 60) -> tuple[int, str, str]:
    """(exit code, stdout, modules the probe saw) of a whole ``pgsteady lint`` process."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    done = subprocess.run([sys.executable, "-c", PROBE, "lint", *argv], capture_output=True,
                          text=True, cwd=project, timeout=timeout, check=False, env=env)
    return done.returncode, done.stdout, done.stderr.rpartition("LOADED")[2].strip()


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


def victim_folder(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A folder outside the project holding files shaped like cache entries."""
    victim = tmp_path.parent / f"{tmp_path.name}-victim"
    victim.mkdir()
    for index in range(5):
        (victim / f"{index}.json").write_text("{}")
        (victim / f"{index}.pickle").write_bytes(b"keep")
        (victim / f"q-{index}.quick").write_bytes(b"keep")
    return victim, {p.name: p.read_bytes() for p in victim.iterdir()}


@pytest.mark.parametrize("linked", [".pgsteady_cache/lint", ".pgsteady_cache"])
def test_a_cache_folder_that_is_a_link_is_left_alone(project, tmp_path, linked):
    """A committed ``.pgsteady_cache`` or ``.pgsteady_cache/lint`` that links to another
    folder: lint deletes and writes nothing there, and reports as without a cache."""
    victim, before = victim_folder(tmp_path)
    link = project / linked
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(victim)
    expected = run(project, "--no-cache", "migrations")[:2]
    assert expected[0] == 1
    for _ in range(2):
        assert run(project, "migrations")[:2] == expected
    assert {p.name: p.read_bytes() for p in victim.iterdir()} == before


def test_a_dangling_gitignore_link_is_never_followed(project, tmp_path):
    """A dangling ``.pgsteady_cache/.gitignore`` link: its target is not created."""
    target = tmp_path.parent / f"{tmp_path.name}-created-by-lint"
    (project / ".pgsteady_cache").mkdir()
    (project / ".pgsteady_cache" / ".gitignore").symlink_to(target)
    assert run(project, "migrations")[0] == 1
    assert not target.exists() and not target.is_symlink()
    assert list((project / ".pgsteady_cache" / "lint").iterdir())  # the cache still works


def _entries(project: Path) -> list[Path]:
    return sorted((project / ".pgsteady_cache" / "lint").iterdir())


def test_entries_linked_to_dev_zero_are_a_miss_not_a_hang(project):
    """Every entry replaced by a link to /dev/zero (and the old predictable names too): the
    next run neither hangs nor fills memory; it lints afresh."""
    first = run(project, "migrations")
    folder = project / ".pgsteady_cache" / "lint"
    names = [p.name for p in _entries(project)]
    names += [f"q-{index:08x}.quick" for index in range(3)]
    key = repr((quick._FORMAT, ("migrations",), str(project), False))
    names.append(f"q-{zlib.crc32(key.encode()):08x}.quick")
    for name in names:
        (folder / name).unlink(missing_ok=True)
        (folder / name).symlink_to("/dev/zero")
    again = run(project, "migrations", timeout=30)
    assert again[:2] == first[:2] and "pglast" in again[2]


def test_an_oversized_or_special_entry_is_a_miss(project, tmp_path):
    """Reads are capped: a file over the limit, a FIFO or a folder under an entry's name is
    read as nothing, at once."""
    with cachedir.open_folder(str(tmp_path / "c"), create=True) as folder:
        assert folder.write("big", b"x" * 1000)
        assert folder.read("big") == b"x" * 1000
        assert folder.read("big", limit=999) is None
        os.mkfifo(tmp_path / "c" / "fifo")
        (tmp_path / "c" / "folder").mkdir()
        assert folder.read("fifo") is None and folder.read("folder") is None


def _forged(project: Path, argv: tuple[str, ...], name: str) -> bytes:
    """A warm-path entry saying ``argv`` printed nothing and passed, depending only on a
    system file: what anyone could commit."""
    key = repr((quick._FORMAT, argv, str(project), False))
    depends = quick._dependencies([name], None, None)
    assert depends is not None
    return quick._pack([quick._FORMAT, key, "", "", depends, "", "All checks passed!\n", "0",
                        name])


def test_a_forged_entry_is_a_miss_with_and_without_no_cache(project):
    """Forged entries (under the old predictable name and over every real entry, signed with
    another secret or not at all) never make lint pass a file with an error."""
    folder = project / ".pgsteady_cache" / "lint"
    assert run(project, "migrations")[0] == 1
    system_file = "/etc/hostname" if os.path.exists("/etc/hostname") else "/etc/passwd"
    for argv in (("migrations",), ("--no-cache", "migrations")):
        forged = _forged(project, argv, system_file)
        key = repr((quick._FORMAT, argv, str(project), False))
        # as is, and signed with a secret not the user's
        for planted in (forged, os.urandom(cachedir.MAC_BYTES) + forged):
            (folder / f"q-{zlib.crc32(key.encode()):08x}.quick").write_bytes(planted)
            for entry in folder.glob("q-*.quick"):
                entry.write_bytes(planted)
            code, out, _ = run(project, *argv)
            assert code == 1 and "require-concurrent-index-creation" in out


def test_no_cache_reads_and_writes_nothing(project, monkeypatch, capsys):
    """``--no-cache`` (and the abbreviations argparse takes, and ``--dsn``) never open the
    cache folder or the secret, on the warm path or after it."""
    monkeypatch.setattr(sys, "argv", ["pgsteady", "lint", "migrations"])
    assert _main._run(sys.argv[1:]) == 1  # a cache to be tempted by
    capsys.readouterr()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the cache was opened")

    monkeypatch.setattr(cachedir, "open_folder", refuse)
    monkeypatch.setattr(cachedir, "secret", refuse)
    for flag in ("--no-cache", "--no-cach", "--no-c"):
        monkeypatch.setattr(sys, "argv", ["pgsteady", "lint", flag, "migrations"])
        assert _main._run(sys.argv[1:]) == 1
    assert "require-concurrent-index-creation" in capsys.readouterr().out
    for argv in (["--dsn", "x"], ["--dsn=x"], ["--ds", "x"], ["-v", "--no-cache"]):
        assert not quick.cacheable([*argv, "migrations"])
        assert quick.replay([*argv, "migrations"]) is None
    assert quick.cacheable(["--format", "json", "migrations"])


def test_a_planted_temporary_file_link_is_never_written_through(project, tmp_path, capsys,
                                                                monkeypatch):
    """Links planted where a run's temporary files would go (the old ``<name>.<pid>.tmp``
    and the new names, made predictable here) leave their target untouched: temporary files
    are created exclusively."""
    victim = tmp_path.parent / f"{tmp_path.name}-target"
    victim.write_text("precious")
    monkeypatch.setattr(cachedir.os, "urandom",
                        lambda size: b"\x01" * size)  # the secret and temporary names
    first = lint(capsys, "migrations")
    folder = project / ".pgsteady_cache" / "lint"
    names = [p.name for p in folder.iterdir()]
    for name in names:
        (folder / name).unlink()
        for planted in (f"{name}.{os.getpid()}.tmp", f"{Path(name).stem}.{os.getpid()}.tmp",
                        f".{name}.{'01' * 8}.tmp"):
            (folder / planted).symlink_to(victim)
    assert lint(capsys, "migrations") == first
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("mode", [0o775, 0o757])
def test_a_folder_others_can_write_is_not_used(project, capsys, monkeypatch, mode):
    """A cache folder writable by group or others is neither read nor written."""
    first = lint(capsys, "migrations")
    folder = project / ".pgsteady_cache" / "lint"
    folder.chmod(mode)
    before = sorted(p.name for p in folder.iterdir())
    linted = count_linted(monkeypatch)
    assert lint(capsys, "migrations") == first
    assert linted == ["0001_users.sql", "0002_index.sql"]
    assert sorted(p.name for p in folder.iterdir()) == before


def test_the_secret_is_private_and_kept_outside_the_project(project, own_secret, capsys):
    """The secret is made 0600 in the XDG cache folder; one others could read, or a link, is
    not used (nothing is cached) rather than trusted."""
    lint(capsys, "migrations")
    secret = own_secret / "pgsteady" / "secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE((own_secret / "pgsteady").stat().st_mode) == 0o700
    assert not list(project.rglob("secret"))
    cachedir._SECRETS.clear()
    secret.chmod(0o644)
    assert cachedir.secret(create=True) is None
    secret.chmod(0o600)
    secret.rename(own_secret / "elsewhere")
    secret.symlink_to(own_secret / "elsewhere")
    assert cachedir.secret(create=True) is None


def _edit_during_run(monkeypatch, path: Path, text: str, after_read: bool) -> None:
    """Edit ``path`` once, while the next run loads its files (before or after reading)."""
    original = runners.load
    done: list[bool] = []

    def load(*args: object, **kwargs: object) -> object:
        if not done and not after_read:
            _write_later(path, text)
        result = original(*args, **kwargs)
        if not done and after_read:
            _write_later(path, text)
        done.append(True)
        return result

    monkeypatch.setattr(runners, "load", load)


def _write_later(path: Path, text: str) -> None:
    info = path.stat()
    path.write_text(text)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 2 * 10**9))


@pytest.mark.parametrize("after_read", [True, False], ids=["after-read", "before-read"])
def test_a_file_edited_during_a_run_is_never_replayed_stale(project, monkeypatch, capsys,
                                                            after_read):
    """A migration edited while lint runs (after the files were stamped): the next run
    reports the file as it is now, never the verdict of the text the edited run saw."""
    path = project / "migrations" / "0002_index.sql"
    path.write_text("SELECT 1;\n")
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns - 10 * 10**9))
    argv = ["lint", "migrations"]
    monkeypatch.setattr(sys, "argv", ["pgsteady", *argv])
    original = runners.load
    _edit_during_run(monkeypatch, path, RISKY.replace("orders", "ordrs"), after_read)
    _main._run(argv)
    capsys.readouterr()
    monkeypatch.setattr(runners, "load", original)
    assert _main._run(argv) == 1
    assert "require-concurrent-index-creation" in capsys.readouterr().out
    assert _main._run(argv) == 1  # and the new verdict is what is kept
    assert "require-concurrent-index-creation" in capsys.readouterr().out


def test_a_cache_dir_with_missing_parents_is_made_and_used(project, capsys, monkeypatch):
    """``--cache-dir`` naming a folder whose parents do not exist yet: they are made (the
    user chose them) and the second run is served from the cache."""
    first = lint(capsys, "--cache-dir", "build/cache/lint", "migrations")
    assert list((project / "build" / "cache" / "lint").glob("*.json"))
    linted = count_linted(monkeypatch)
    assert lint(capsys, "--cache-dir", "build/cache/lint", "migrations") == first
    assert linted == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder away needs root")
def test_a_folder_owned_by_someone_else_is_not_used(project, capsys, monkeypatch):
    """A cache folder another user owns (a shared checkout) is neither read nor written."""
    first = lint(capsys, "migrations")
    folder = project / ".pgsteady_cache"
    os.chown(folder, 54321, 54321)
    linted = count_linted(monkeypatch)
    assert lint(capsys, "migrations") == first
    assert linted == ["0001_users.sql", "0002_index.sql"]
