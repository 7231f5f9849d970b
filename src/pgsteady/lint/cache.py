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

Entries are JSON, plain data and nothing else: the folder sits in the project being linted,
so a pull request can put files there, and loading one must never run code (a pickle would).
:mod:`cachedir` keeps the folder safe: no link followed, reads capped, temporary files made
exclusively, and every entry signed with a secret kept outside the project, so an entry a
repository carries is a miss, never a verdict. Each names its format, the linter's code stamp
and its key, and is rebuilt field by field with every type checked; one that does not parse,
or that another version of the code wrote, is a miss, never an error, and is replaced when
the run stores its result. Written atomically (exclusive temporary file, then rename); at most
:data:`MAX_ENTRIES` are kept, the oldest go first.
``--no-cache`` bypasses all of it; ``--dsn`` runs are not cached (the database changes).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path

from pgsteady._debuglog import debug
from pgsteady._version import __version__
from pgsteady.lint import cachedir
from pgsteady.lint.config import LintConfig
from pgsteady.lint.files import Unit
from pgsteady.lint.quick import code_stamp, file_stamps, racy
from pgsteady.lint.report import FileReport, Finding, SyntaxProblem
from pgsteady.lint.schema import ColumnType, Schema, Table

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

LOGGER = "pgsteady.lint"
FOLDER = ".pgsteady_cache"
MAX_ENTRIES = 64
_FORMAT = "pgsteady-lint-cache-4"
_SUFFIX = ".json"


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
    """A key from the code, the configuration, the options and every file's path, size,
    times and inode under ``paths`` (folders walked whole: a new file, or a tool's marker
    file, changes it; a file given alone brings its folder's and the one above's times, which
    change when an entry is added or removed). Take it before reading the files. None if a
    path is missing, or if a file was written so recently that an edit could keep its
    modification time (:func:`quick.racy`): then no run is stored under it."""
    started = time.time_ns()
    newest: list[int] = []
    stamps = file_stamps(paths, newest)
    if stamps is None or racy(newest[0], started):
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
    """The linter's own code (size and mtime of each module): an edit invalidates the cache.
    Taken once per process (every entry read or written carries it)."""
    if not _FINGERPRINT:
        stamp = f"{_FORMAT}:{__version__}:{code_stamp()}"
        _FINGERPRINT.append(hashlib.blake2b(stamp.encode(), digest_size=16).digest())
    return _FINGERPRINT[0]


_FINGERPRINT: list[bytes] = []


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
    """Entries under ``folder``, opened through :mod:`cachedir` (no link followed, every entry
    signed with the user's secret); every failure to read or write is logged and ignored."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._open: list[cachedir.Folder | None] = []

    def _folder(self, create: bool) -> cachedir.Folder | None:
        """The folder, opened once per process (or None: unsafe, or no secret)."""
        if not self._open or (self._open[0] is None and create):
            opened = cachedir.open_folder(str(self.folder), create)
            if opened is None:
                debug(LOGGER, "cache folder %s missing or not safe to use", self.folder)
            self._open[:] = [opened]
        return self._open[0]

    def close(self) -> None:
        """Close the folder's descriptor (the process's end does it too)."""
        if self._open and self._open[0] is not None:
            self._open[0].close()
        self._open.clear()

    def longest(self, keys: Sequence[str]) -> tuple[int, Entry | None]:
        """(how many units the longest cached prefix covers, its entry)."""
        for count in range(len(keys), 0, -1):
            entry = self._read(keys[count - 1])
            if entry is not None and len(entry.reports) == count:
                return count, entry
        return 0, None

    def quick(self, key: str) -> Quick | None:
        """The report stored under a metadata key, if any."""
        data = self._load(key, "quick")
        if data is None:
            return None
        try:
            return Quick(_reports(data["reports"]), _str(data["runner"]), _str(data["reason"]),
                         [(_str(p), _str(r)) for p, r in _list(data["skipped"])])
        except (_Bad, KeyError, TypeError, ValueError) as exc:
            debug(LOGGER, "cache entry s-%s not ours: %r", key, exc)
            return None

    def _read(self, key: str) -> Entry | None:
        data = self._load(key, "entry")
        if data is None:
            return None
        try:
            return Entry(_reports(data["reports"]), _schema(data["schema"]))
        except (_Bad, KeyError, TypeError, ValueError) as exc:
            debug(LOGGER, "cache entry %s not ours: %r", key, exc)
            return None

    def _name(self, folder: cachedir.Folder, key: str, kind: str) -> str:
        return f"{'s-' if kind == 'quick' else ''}{folder.name(kind, key.encode())}{_SUFFIX}"

    def _load(self, key: str, kind: str) -> dict[str, Any] | None:
        """The data of the ``kind`` entry for ``key`` if it is JSON this code wrote, signed
        with this user's secret, else None."""
        folder = self._folder(create=False)
        if folder is None:
            return None
        name = self._name(folder, key, kind)
        body = folder.read(name)
        if body is None:
            return None
        try:
            document = json.loads(body)
        except (ValueError, RecursionError) as exc:  # a damaged entry is a miss
            debug(LOGGER, "cache entry %s unreadable: %s", name, exc)
            return None
        if not (isinstance(document, dict) and document.get("format") == _FORMAT
                and document.get("code") == _code_fingerprint().hex()
                and document.get("key") == key and document.get("kind") == kind
                and isinstance(document.get("data"), dict)):
            debug(LOGGER, "cache entry %s: another format, code or key", name)
            return None
        data: dict[str, Any] = document["data"]
        return data

    def store(self, key: str, entry: Entry | Quick) -> None:
        """Write one entry atomically, then trim the folder to MAX_ENTRIES."""
        if isinstance(entry, Quick):
            kind = "quick"
            data: dict[str, object] = {
                "reports": [_report_data(r) for r in entry.reports], "runner": entry.runner,
                "reason": entry.reason, "skipped": [list(s) for s in entry.skipped]}
        else:
            kind = "entry"
            data = {"reports": [_report_data(r) for r in entry.reports],
                    "schema": _schema_data(entry.schema)}
        document = {"format": _FORMAT, "code": _code_fingerprint().hex(), "key": key,
                    "kind": kind, "data": data}
        folder = self._folder(create=True)
        if folder is None:
            return
        body = json.dumps(document, separators=(",", ":")).encode("ascii")
        if folder.write(self._name(folder, key, kind), body):
            folder.trim(MAX_ENTRIES, _SUFFIX, (".pickle",))
        else:
            debug(LOGGER, "cache not written in %s", self.folder)


# -- entries as JSON: written from the records, read back with every type checked --------


class _Bad(ValueError):
    """A value that is not what :meth:`Cache.store` writes."""


def _str(value: object) -> str:
    if type(value) is not str:
        raise _Bad(value)
    return value


def _int(value: object) -> int:
    if type(value) is not int:
        raise _Bad(value)
    return value


def _bool(value: object) -> bool:
    if type(value) is not bool:
        raise _Bad(value)
    return value


def _list(value: object, size: int | None = None) -> list[Any]:
    if type(value) is not list or (size is not None and len(value) != size):
        raise _Bad(value)
    return value


_NONE = type(None)
#: Finding's fields in the order its ``__init__`` takes them, and the types each may have.
_FINDING_TYPES: tuple[type | tuple[type, ...], ...] = (
    str, int, int, str, str, str, str, (str, _NONE), (int, _NONE), (int, _NONE), (str, _NONE),
    int, int)


def _finding_data(f: Finding) -> list[object]:
    return [f.path, f.line, f.col, f.rule, f.message, f.help, f.severity, f.table, f.rows,
            f.size_bytes, f.lock, f.statement_line, f.statement_col]


def _finding(raw: object) -> Finding:
    fields = _list(raw, len(_FINDING_TYPES))
    for value, kind in zip(fields, _FINDING_TYPES, strict=True):
        if not isinstance(value, kind):
            raise _Bad(value)
    if fields[6] not in ("error", "warning"):
        raise _Bad(fields[6])
    return Finding(*fields)


def _report_data(report: FileReport) -> list[object]:
    problem = report.syntax_error
    return [report.path, report.statements,
            None if problem is None else [problem.path, problem.line, problem.col,
                                          problem.message],
            [_finding_data(f) for f in report.findings]]


def _reports(raw: object) -> list[FileReport]:
    reports = []
    for item in _list(raw):
        path, statements, problem, findings = _list(item, 4)
        syntax_error = None
        if problem is not None:
            where, line, col, message = _list(problem, 4)
            syntax_error = SyntaxProblem(_str(where), _int(line), _int(col), _str(message))
        reports.append(FileReport(_str(path), [_finding(f) for f in _list(findings)],
                                  syntax_error, _int(statements)))
    return reports


def _type_data(column: ColumnType | None) -> list[object] | None:
    return None if column is None else [column.name, list(column.mods), column.array]


def _type(raw: object) -> ColumnType | None:
    if raw is None:
        return None
    name, mods, array = _list(raw, 3)
    return ColumnType(_str(name), tuple(_int(m) for m in _list(mods)), _bool(array))


def _schema_data(schema: Schema) -> dict[str, object]:
    return {
        "tables": [[*key, [[name, _type_data(t)] for name, t in table.columns.items()],
                    table.created_in, table.complete,
                    None if table.partition_of is None else list(table.partition_of),
                    table.partitioned, sorted(table.not_null)]
                   for key, table in schema.tables.items()],
        "views": [[*key, serial] for key, serial in schema.views.items()],
        "indexes": [[*key, *table] for key, table in schema.indexes.items()],
        "enums": [[*key, labels] for key, labels in schema.enums.items()],
        "enums_created": [[*key, serial] for key, serial in schema.enums_created.items()],
        "search_path": list(schema.search_path),
        "file_serial": schema.file_serial, "change_start": schema.change_start,
        "one_change": schema.one_change, "from_catalog": schema.from_catalog,
    }


def _key(schema: object, name: object) -> tuple[str, str]:
    return _str(schema), _str(name)


def _schema(raw: object) -> Schema:
    if not isinstance(raw, dict):
        raise _Bad(raw)
    schema = Schema(file_serial=_int(raw["file_serial"]),
                    from_catalog=_bool(raw["from_catalog"]))
    for item in _list(raw["tables"]):
        space, name, columns, created_in, complete, parent, partitioned, not_null = \
            _list(item, 8)
        table = Table(
            {_str(column): _type(kind) for column, kind in (_list(c, 2) for c in _list(columns))},
            created_in=_int(created_in), complete=_bool(complete),
            partition_of=None if parent is None else _key(*_list(parent, 2)),
            partitioned=_bool(partitioned))
        table.not_null = {_str(column) for column in _list(not_null)}
        schema.tables[_key(space, name)] = table
    for space, name, serial in (_list(item, 3) for item in _list(raw["views"])):
        schema.views[_key(space, name)] = _int(serial)
    for space, name, table_space, table in (_list(item, 4) for item in _list(raw["indexes"])):
        schema.indexes[_key(space, name)] = _key(table_space, table)
    for space, name, labels in (_list(item, 3) for item in _list(raw["enums"])):
        schema.enums[_key(space, name)] = [_str(label) for label in _list(labels)]
    for space, name, serial in (_list(item, 3) for item in _list(raw["enums_created"])):
        schema.enums_created[_key(space, name)] = _int(serial)
    schema.search_path = tuple(_str(part) for part in _list(raw["search_path"]))
    schema.change_start = _int(raw["change_start"])
    schema.one_change = _bool(raw["one_change"])
    return schema

def default_folder(config: LintConfig) -> Path:
    """``.pgsteady_cache/lint`` next to the pyproject.toml in use, else in the current folder."""
    root = Path(config.source).parent if config.source else Path.cwd()
    return root / FOLDER / "lint"
