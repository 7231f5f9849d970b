"""A content-hash cache of lint results, in ``.pgsteady_cache/`` as ruff keeps ``.ruff_cache``.

In front of it, a key from the files' metadata (path, size, modification time, as ruff
and make use them): when nothing was touched since the last run, its report is read back
without reading, detecting or hashing a single file. Anything touched falls through to the
content hashes. A run's files are hashed in order into a chain: the key after file ``n``
covers the linter's code, the configuration, the runner's conventions and the content of
files 1..n (and of the history). An entry holds the reports of those files and the schema
they built, so:

- nothing changed: the whole run is read back from one entry, without importing the parser;
- files were added after the last run's: its entry is found at their key, and only the new
  files are linted, starting from the schema it kept;
- anything else changed: everything is linted again.

Entries are pickles written atomically (temporary file, then rename); a damaged or foreign
entry is a miss, never an error. At most :data:`MAX_ENTRIES` are kept, the oldest go first.
``--no-cache`` bypasses all of it; ``--dsn`` runs are not cached (the database changes).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Sequence
from pathlib import Path

from pgsteady._debuglog import debug
from pgsteady._version import __version__
from pgsteady.migrate.lint.config import LintConfig
from pgsteady.migrate.lint.files import Unit
from pgsteady.migrate.lint.quick import code_stamp, file_stamps
from pgsteady.migrate.lint.report import FileReport
from pgsteady.migrate.lint.schema import Schema

LOGGER = "pgsteady.lint"
FOLDER = ".pgsteady_cache"
MAX_ENTRIES = 64
_FORMAT = b"pgsteady-lint-cache-1"


class Entry:
    """What a run of files 1..n produced."""

    __slots__ = ("reports", "schema")

    def __init__(self, reports: list[FileReport], schema: Schema) -> None:
        self.reports = reports
        self.schema = schema


class Quick:
    """A whole run's report, found by file metadata alone."""

    __slots__ = ("reason", "reports", "runner", "skipped")

    def __init__(self, reports: list[FileReport], runner: str, reason: str,
                 skipped: list[tuple[str, str]]) -> None:
        self.reports = reports
        self.runner = runner
        self.reason = reason
        self.skipped = skipped


def stat_key(config: LintConfig, options: tuple[object, ...], paths: Sequence[str],
             ) -> str | None:
    """A key from the code, the configuration, the options and every file's path, size and
    modification time under ``paths`` (folders walked whole: a new file, or a tool's marker
    file, changes it; a file given alone brings its folder's and the one above's times, which
    change when an entry is added or removed). None if a path is missing."""
    stamps = file_stamps(paths)
    if stamps is None:
        return None
    digest = hashlib.blake2b(_code_fingerprint(), digest_size=20)
    digest.update(repr((_config_fields(config), options)).encode())
    digest.update(stamps.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _config_fields(config: LintConfig) -> tuple[object, ...]:
    return (config.pg_version, sorted(config.disable), sorted(config.enable),
            sorted(config.warn), config.assume_runner_timeouts, config.assume_in_transaction,
            config.runner)


def _code_fingerprint() -> bytes:
    """The linter's own code (size and mtime of each module): an edit invalidates the cache."""
    stamp = f"{_FORMAT.decode()}:{__version__}:{code_stamp()}"
    return hashlib.blake2b(stamp.encode(), digest_size=16).digest()


def chain(config: LintConfig, runner: str, units: Sequence[Unit],
          history: Sequence[Unit]) -> list[str]:
    """The key after each unit (hex), every key covering everything before it."""
    digest = hashlib.blake2b(_code_fingerprint(), digest_size=20)
    digest.update(repr((_config_fields(config), runner)).encode())
    for unit in history:
        digest.update(_unit_bytes(unit))
    keys = []
    for unit in units:
        digest.update(_unit_bytes(unit))
        keys.append(digest.copy().hexdigest())
    return keys


def _unit_bytes(unit: Unit) -> bytes:
    text = hashlib.blake2b(unit.text.encode("utf-8", "surrogatepass"), digest_size=20).digest()
    return repr((unit.display, unit.in_transaction, unit.runner_timeouts)).encode() + text


class Cache:
    """Entries under ``folder``; every failure to read or write is logged and ignored."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def longest(self, keys: Sequence[str]) -> tuple[int, Entry | None]:
        """(how many units the longest cached prefix covers, its entry)."""
        for count in range(len(keys), 0, -1):
            entry = self._read(keys[count - 1])
            if entry is not None and len(entry.reports) == count:
                return count, entry
        return 0, None

    def quick(self, key: str) -> Quick | None:
        """The report stored under a metadata key, if any."""
        found = self._load(self.folder / f"s-{key}.pickle")
        return found if isinstance(found, Quick) else None

    def _read(self, key: str) -> Entry | None:
        found = self._load(self.folder / f"{key}.pickle")
        return found if isinstance(found, Entry) else None

    def _load(self, path: Path) -> object:
        try:
            with path.open("rb") as handle:
                entry = pickle.load(handle)  # noqa: S301 -- our own files, keyed by content
        except FileNotFoundError:
            return None
        except Exception as exc:  # a damaged entry is a miss
            debug(LOGGER, "cache entry %s unreadable: %s", path, exc)
            return None
        return entry

    def store(self, key: str, entry: Entry | Quick) -> None:
        """Write one entry atomically, then trim the folder to MAX_ENTRIES."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            gitignore = self.folder.parent / ".gitignore"
            if self.folder.parent.name == FOLDER and not gitignore.exists():
                gitignore.write_text("# Automatically created by pgsteady lint.\n*\n")
            # Own name per process (tempfile would cost the warm path shutil, bz2, lzma).
            name = f"s-{key}" if isinstance(entry, Quick) else key
            temporary = self.folder / f"{name}.{os.getpid()}.tmp"
            with temporary.open("wb") as out:
                pickle.dump(entry, out, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, self.folder / f"{name}.pickle")
            self._trim()
        except OSError as exc:
            debug(LOGGER, "cache not written in %s: %s", self.folder, exc)

    def _trim(self) -> None:
        entries = sorted(self.folder.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns)
        for old in entries[:-MAX_ENTRIES]:
            old.unlink(missing_ok=True)


def default_folder(config: LintConfig) -> Path:
    """``.pgsteady_cache/lint`` next to the pyproject.toml in use, else in the current folder."""
    root = Path(config.source).parent if config.source else Path.cwd()
    return root / FOLDER / "lint"
