"""Other tools' migration folders, as they are: the one place that knows their conventions.

For each layout: how files are named, ordered and versioned; which part of a file is its Up
migration; whether it runs in a transaction; and which history table the tool keeps (read by
:mod:`pgsteady.migrate.history`). ``migrate``, ``preflight`` and lint's runner profiles share
these names. What each tool does, and so what pgsteady does with its folder:

- ``pgsteady``: ``<version>_<name>.sql``; one transaction per file unless its header says
  ``-- pgsteady: no-transaction``.
- ``prisma``: ``<timestamp>_<name>/migration.sql``, ordered by folder name. Prisma sends the
  whole file as one multi-statement query, which PostgreSQL runs as one implicit transaction;
  a file holding one statement that cannot run in a transaction runs alone.
- ``goose``: ``<version>_<name>.sql`` with ``-- +goose Up`` / ``-- +goose Down`` sections
  (``-- +goose StatementBegin`` / ``StatementEnd`` only group statements, which pgsteady's
  splitter does by itself); one transaction unless ``-- +goose NO TRANSACTION``.
- ``golang-migrate``: ``<version>_<name>.up.sql`` (``.down.sql`` ignored); the file is sent as
  one multi-statement query: transactional as Prisma's.
- ``dbmate``: ``<version>_<name>.sql`` with ``-- migrate:up`` / ``-- migrate:down``; one
  transaction unless the up line says ``transaction:false``.
- ``flyway``: ``V<version>__<description>.sql`` (``1``, ``1.2``, ``1_2`` = ``1.2``; compared as
  Flyway compares them, ``001`` = ``1`` = ``1.0``, and written as the file writes them), one
  transaction unless its statements cannot run in one (Flyway spots ``CREATE INDEX
  CONCURRENTLY``, ``VACUUM`` and the like itself and then runs the script without one; it
  refuses a script mixing them with other statements);
  ``executeInTransaction=true|false`` in a ``<file>.conf`` next to it or in a
  ``-- flyway:executeInTransaction=...`` header decides instead. Repeatable (``R__``), undo
  (``U``) and baseline (``B``) scripts are reported as skipped.
- ``diesel``: ``<version>_<name>/up.sql`` (``down.sql`` beside it is not applied), the version
  being the part before the first ``_`` without its dashes (``2024-01-31-120000`` is
  ``20240131120000``), ordered as Diesel orders them (as text). One transaction per migration
  unless its ``metadata.toml`` says ``run_in_transaction = false``; Diesel then sends
  ``up.sql`` as one multi-statement query, transactional as Prisma's. Hasura and other tools
  that keep ``<version>_<name>/up.sql`` folders read the same, with Diesel's history table.
- ``sql-migrate``: any ``*.sql`` with ``-- +migrate Up`` / ``-- +migrate Down`` lines (exactly so,
  at the start of a line); every Up section runs, keyed by file name and ordered as
  sql-migrate orders them (by leading number, then by name); one transaction unless an Up line
  says ``notransaction`` (then statement by statement).
- ``tern``: ``<number>_<name>.sql`` numbered 1, 2, 3... without gaps; what comes before
  ``---- create above / drop below ----`` runs (the text exactly, wherever it is, as tern
  splits); one transaction unless that part has the line ``---- tern: disable-tx ----`` (then
  statement by statement).

This module imports neither psycopg nor pglast (lint imports it and must start fast).
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path

from pgsteady._record import Record

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Final


class LayoutError(ValueError):
    """A folder or file that does not follow its layout: ``file:line: what; how to fix``."""


NAMES = ("pgsteady", "prisma", "goose", "golang-migrate", "dbmate", "flyway", "diesel",
         "sql-migrate", "tern")
MAX_VERSION = 2**63 - 1  # history tables keep versions as bigint
_DETECT_BYTES = 65536  # markers are looked for in the first 64 KiB of a file

_PGSTEADY_NAME = re.compile(r"^(?P<version>\d+)_(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)\.sql$")
_NUMBERED = re.compile(r"^(?P<version>\d+)_(?P<name>.+)\.sql$")
_GOLANG_UP = re.compile(r"^(?P<version>\d+)_(?P<name>.+)\.up\.sql$")
_GOLANG_DOWN = re.compile(r"^\d+_.+\.down\.sql$")
_PRISMA_DIR = re.compile(r"^(?P<version>\d+)_(?P<name>.+)$")
_DIESEL_DIR = re.compile(r"^(?P<version>\d[\d-]*)_(?P<name>.+)$")
_FLYWAY = re.compile(r"^V(?P<version>[0-9]+(?:[._][0-9]+)*)__(?P<name>.+)\.sql$")
_FLYWAY_OTHER = re.compile(r"^(?:R|U\d|B\d).*__.*\.sql$")
_FLYWAY_VERSION_TEXT = re.compile(r"[0-9]+(?:\.[0-9]+)*")
_GOOSE_GO = re.compile(r"^(?P<version>\d+)_(?P<name>\w+)\.go$")
_GOOSE_MARK = re.compile(r"^--\s*\+goose\s+(?P<what>.+?)\s*$", re.IGNORECASE)
_DBMATE_MARK = re.compile(r"^--\s*migrate:(?P<what>up|down)\b(?P<options>.*)$", re.IGNORECASE)
# sql-migrate and tern match their marks exactly (case, spacing): so does pgsteady.
_SQL_MIGRATE_PREFIX = "-- +migrate "
_SQL_MIGRATE_UP = re.compile(r"^-- \+migrate Up(?:[ \t]|$)", re.MULTILINE)
_SQL_MIGRATE_ANY = re.compile(r"^-- \+migrate (?:Up|Down)(?:[ \t]|$)", re.MULTILINE)
_TERN_SPLIT = "---- create above / drop below ----"
_TERN_NO_TX = re.compile(r"^---- tern: disable-tx ----$", re.MULTILINE)
_LEADING_NUMBER = re.compile(r"^(\d+)")
# sqlx runs a file outside a transaction when its first line is exactly this; pgsteady's
# layout (sqlx names files the same way) and lint honour it like ``-- pgsteady: no-transaction``.
SQLX_NO_TRANSACTION = re.compile(r"-- no-transaction[ \t]*(?:\n|$)")
_FLYWAY_HEADER = re.compile(r"^--\s*flyway:executeInTransaction\s*=\s*(?P<value>\w+)\s*$",
                            re.IGNORECASE)


class UpPart(Record):
    """The Up migration of a file: its text, and where that text starts in the file.

    The text is a whole-line slice of the file, so line ``n`` of it is line
    ``first_line + n - 1`` of the file and columns are unchanged.
    """

    __slots__ = ("first_line", "text")

    def __init__(self, text: str, first_line: int = 1) -> None:
        self.text: Final = text
        self.first_line: Final = first_line

    def file_line(self, line: int) -> int:
        """The file's line for ``line`` (1-based) of the Up text."""
        return self.first_line + line - 1


class MigrationFile(Record):
    """One migration as its tool sees it, before its SQL is analysed.

    ``version``: the ordering number (for flyway, the first part of a dotted version);
    ``tag``: the version as the tool writes it in its history table; ``transactional`` None:
    as the statements allow (a lone statement may not); ``text``: the whole file, for its
    checksum; ``elsewhere``: why pgsteady cannot run it, when its tool runs it from code
    (goose's Go migrations): it keeps its place in the order and the history, and migrate
    stops before it.
    """

    __slots__ = ("elsewhere", "layout", "name", "order", "path", "tag", "text",
                 "transactional", "up", "version")
    _UNSHOWN = ("text",)

    def __init__(self, layout: str, version: int, tag: str, order: tuple[int, ...],  # noqa: PLR0917
                 name: str, path: Path, up: UpPart, transactional: bool | None, text: str,
                 elsewhere: str | None = None) -> None:
        self.layout: Final = layout
        self.version: Final = version
        self.tag: Final = tag
        self.order: Final = order
        self.name: Final = name
        self.path: Final = path
        self.up: Final = up
        self.transactional: Final = transactional
        self.text: Final = text
        self.elsewhere: Final = elsewhere


class Skipped(Record):
    """A folder entry that is not a migration of the layout, and why; ``said`` False:
    expected clutter (.gitkeep, .DS_Store), logged only with -vv."""

    __slots__ = ("path", "reason", "said")

    def __init__(self, path: Path, reason: str, said: bool = True) -> None:
        self.path: Final = path
        self.reason: Final = reason
        self.said: Final = said


class Scan(Record):
    """A folder read as one layout."""

    __slots__ = ("files", "layout", "skipped")
    __hash__ = None  # type: ignore[assignment]  # its lists may change

    def __init__(self, layout: str, files: list[MigrationFile], skipped: list[Skipped],
                 ) -> None:
        self.layout = layout
        self.files = files
        self.skipped = skipped


def _lines_between(text: str, start_line: int, end_line: int | None) -> str:
    """Lines ``start_line`` up to (not including) ``end_line`` of ``text``, whole."""
    lines = text.splitlines(keepends=True)
    return "".join(lines[start_line - 1:None if end_line is None else end_line - 1])


def _check_version(path: Path, digits: str) -> int:
    version = int(digits)
    if version > MAX_VERSION:
        raise LayoutError(f"{path}:1: version {digits} is too large (the history keeps a "
                           f"bigint, at most {MAX_VERSION}); use a smaller number")
    return version


def read(path: Path, heads: dict[Path, bytes] | None = None) -> str:
    """A migration file as text; LayoutError naming the file if it is not UTF-8. ``heads``:
    files already read whole (:func:`detect`), used once and dropped."""
    try:
        data = heads.pop(path, None) if heads else None
        if data is None:
            return path.read_text(encoding="utf-8-sig")
        return data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise LayoutError(f"{path}:1: cannot read it as UTF-8 text ({exc}); fix the file") \
            from None


# --- Up parts and transactions, per layout ---------------------------------------------------


def goose_up(path: Path, text: str) -> tuple[UpPart, bool]:
    """goose: the lines after ``-- +goose Up`` up to ``-- +goose Down``."""
    up_line: int | None = None
    down_line: int | None = None
    transactional = True
    for number, line in enumerate(text.splitlines(), start=1):
        match = _GOOSE_MARK.match(line.strip())
        if match is None:
            continue
        what = match["what"].lower()
        if what == "up" and up_line is None:
            up_line = number
        elif what == "down" and down_line is None:
            down_line = number
        elif what == "no transaction":
            transactional = False
        elif what in ("statementbegin", "statementend", "envsub on", "envsub off"):
            continue
        else:
            raise LayoutError(f"{path}:{number}: unknown goose annotation {line.strip()!r}; "
                               f"known: Up, Down, StatementBegin, StatementEnd, NO TRANSACTION")
    if up_line is None:
        raise LayoutError(f"{path}:1: no '-- +goose Up' annotation; goose needs one before "
                           f"the Up statements")
    if down_line is not None and down_line < up_line:
        raise LayoutError(f"{path}:{down_line}: '-- +goose Down' comes before '-- +goose Up'; "
                           f"put the Up section first")
    return UpPart(_lines_between(text, up_line + 1, down_line), up_line + 1), transactional


def dbmate_up(path: Path, text: str) -> tuple[UpPart, bool]:
    """dbmate: the lines after ``-- migrate:up`` up to ``-- migrate:down``."""
    up_line: int | None = None
    down_line: int | None = None
    transactional = True
    for number, line in enumerate(text.splitlines(), start=1):
        match = _DBMATE_MARK.match(line.strip())
        if match is None:
            continue
        if match["what"].lower() == "up" and up_line is None:
            up_line = number
            options = match["options"].replace(" ", "").lower()
            transactional = "transaction:false" not in options
        elif match["what"].lower() == "down" and down_line is None:
            down_line = number
    if up_line is None:
        raise LayoutError(f"{path}:1: no '-- migrate:up' line; dbmate needs one before the "
                           f"up statements")
    if down_line is not None and down_line < up_line:
        raise LayoutError(f"{path}:{down_line}: '-- migrate:down' comes before "
                           f"'-- migrate:up'; dbmate requires the up block first")
    return UpPart(_lines_between(text, up_line + 1, down_line), up_line + 1), transactional


def sql_migrate_up(path: Path, text: str) -> tuple[UpPart, bool]:
    """sql-migrate: every line of every ``-- +migrate Up`` section (up to the next ``Up`` or
    ``Down`` line), the rest blanked so lines keep their numbers; ``notransaction`` on an Up
    line turns the transaction off. Other ``-- +migrate`` commands only group statements."""
    kept: list[str] = []
    direction = None
    transactional = True
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if bare.startswith(_SQL_MIGRATE_PREFIX):
            fields = bare[len(_SQL_MIGRATE_PREFIX):].split()
            if not fields:
                raise LayoutError(f"{path}:{len(kept) + 1}: incomplete sql-migrate command "
                                  f"{bare!r}; write -- +migrate Up or -- +migrate Down")
            if fields[0] in ("Up", "Down"):
                direction = fields[0]
                transactional = transactional and not (
                    direction == "Up" and "notransaction" in fields[1:])
            kept.append("\n" if line.endswith("\n") else "")
            continue
        kept.append(line if direction == "Up" else "\n" if line.endswith("\n") else "")
    if direction is None:
        raise LayoutError(f"{path}:1: no '-- +migrate Up' or '-- +migrate Down' line; "
                          f"sql-migrate refuses such a file")
    return UpPart("".join(kept)), transactional


def tern_up(text: str) -> tuple[UpPart, bool]:
    """tern: the text before ``---- create above / drop below ----`` (all of a file without
    it), in a transaction unless it has the line ``---- tern: disable-tx ----``."""
    at = text.find(_TERN_SPLIT)
    up = text if at < 0 else text[:at]
    return UpPart(up), _TERN_NO_TX.search(up) is None


# Lines after which another tool's file holds its rollback (MyBatis, rambler, Play, and the
# layouts above): run as a pgsteady file, the rollback would run right after the change.
# (Compiled on first use, by re's cache: only pgsteady-layout scans need it.)
_DOWN_MARK = (
    r"^[ \t]*(?:--\s*//\s*@UNDO|--\s*rambler\s+down|(?:#\s*-*|--+)\s*(?:-+\s*)?!Downs|"
    r"--\s*\+goose\s+down|--\s*migrate:down|--\s*\+migrate\s+down|"
    r".*---- create above / drop below ----).*$")


def _refuse_down_part(path: Path, text: str) -> None:
    """LayoutError for a pgsteady-layout file that holds another tool's rollback part."""
    down = re.search(_DOWN_MARK, text, re.IGNORECASE | re.MULTILINE)
    if down is not None:
        line = text.count("\n", 0, down.start()) + 1
        raise LayoutError(f"{path}:{line}: {down[0].strip()!r} starts a rollback part, which "
                          f"a pgsteady migration would run right after the change; pass the "
                          f"folder's tool with --layout (one of {', '.join(NAMES[1:])}), or "
                          f"move the rollback out of the file")


def sql_migrate_order(name: str) -> tuple[int, ...]:
    """sql-migrate's order: names with a leading number first, by that number, then the rest;
    ties by name (as text, code point by code point)."""
    number = _LEADING_NUMBER.match(name)
    codes = tuple(ord(c) for c in name)
    return (0, int(number[1]), *codes) if number else (1, *codes)


def flyway_transactional(path: Path, text: str) -> bool | None:
    """Flyway: ``executeInTransaction`` from the script's .conf or header; None when neither
    says, and Flyway decides from the statements (in a transaction unless one cannot run in
    one: the caller, who has parsed them, applies that)."""
    conf = path.with_name(path.name + ".conf")
    settings = conf.read_text(encoding="utf-8") if conf.is_file() else ""
    for line in settings.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "executeInTransaction":
            return value.strip().lower() != "false"
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("--"):
            break
        match = _FLYWAY_HEADER.match(stripped)
        if match is not None:
            return match["value"].lower() != "false"
    return None


def diesel_transactional(script: Path) -> bool | None:
    """Diesel: in a transaction unless the migration's ``metadata.toml`` says
    ``run_in_transaction = false``; then None, as the statements allow (Diesel sends ``up.sql``
    as one multi-statement query, so only a lone statement runs outside a transaction)."""
    metadata = script.with_name("metadata.toml")
    if not metadata.is_file():
        return True
    import tomllib  # noqa: PLC0415 -- only for a Diesel migration that has settings

    try:
        settings = tomllib.loads(metadata.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise LayoutError(f"{metadata}:1: cannot read it as TOML ({exc}); fix the file (Diesel "
                          f"would ignore it and run the migration in a transaction)") from None
    # Diesel reads a metadata.toml without the key as false (serde's default for a bool)
    value = settings.get("run_in_transaction", False)
    if not isinstance(value, bool):
        raise LayoutError(f"{metadata}:1: run_in_transaction must be true or false, not "
                          f"{value!r}; fix the file")
    return True if value else None


def flyway_checksum(text: str) -> int:
    """Flyway's checksum of a script: CRC32 over its lines without line breaks, as a signed
    32-bit number (what ``flyway_schema_history.checksum`` holds)."""
    crc = 0
    for line in re.split(r"\r\n|\r|\n", text.removeprefix("\ufeff")):
        crc = zlib.crc32(line.encode("utf-8"), crc)
    return crc - 2**32 if crc >= 2**31 else crc


def flyway_version(digits: str) -> tuple[str, tuple[int, ...]]:
    """``1_2`` -> ("1.2", (1, 2)), ``001`` -> ("001", (1,)): Flyway's display text (the file's
    digits, ``_`` read as ``.``; what ``flyway_schema_history.version`` holds) and its order."""
    text = digits.replace("_", ".")
    order = flyway_order(text)
    assert order is not None  # the file name pattern admits digits and separators only
    return text, order


def flyway_order(text: str) -> tuple[int, ...] | None:
    """A Flyway version as Flyway compares it (``MigrationVersion``): numbers split on ``.``,
    trailing zeros dropped, so ``001`` = ``1`` = ``1.0`` and ``1.10`` > ``1.9``. Dropping them
    makes tuple order Flyway's order. None for text Flyway would not read as a version."""
    if not _FLYWAY_VERSION_TEXT.fullmatch(text):
        return None
    parts = [int(p) for p in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


# --- folders ---------------------------------------------------------------------------------


class _Entry(Record):
    """One folder entry, its kind read once (``os.scandir`` knows it without a stat);
    ``dangling``: a symbolic link to nothing."""

    __slots__ = ("dangling", "is_dir", "is_file", "name", "path")

    def __init__(self, path: Path, name: str, is_dir: bool, is_file: bool,
                 dangling: bool) -> None:
        self.path: Final = path
        self.name: Final = name
        self.is_dir: Final = is_dir
        self.is_file: Final = is_file
        self.dangling: Final = dangling


def _entries(folder: Path) -> list[_Entry]:
    """The folder's entries sorted by name."""
    try:
        with os.scandir(folder) as listing:
            found = [_entry(folder, item) for item in listing]
    except (FileNotFoundError, NotADirectoryError):
        what = "a file, not a folder" if folder.exists() else "no such directory"
        raise LayoutError(f"{folder}: {what}; pass the folder of migration files with --dir") \
            from None
    found.sort(key=lambda e: e.name)
    return found


class Listing:
    """One look at a folder, shared by :func:`detect` and :func:`scan`: its entries, and the
    files detect read whole (used once by scan, then dropped)."""

    __slots__ = ("entries", "folder", "heads")

    def __init__(self, folder: Path, entries: list[_Entry] | None = None,
                 heads: dict[Path, bytes] | None = None) -> None:
        self.folder = folder
        self.entries: list[_Entry] = [] if entries is None else entries
        self.heads: dict[Path, bytes] = {} if heads is None else heads

    @classmethod
    def of(cls, folder: str | Path) -> Listing:
        path = Path(folder)
        return cls(path, _entries(path))


def _entry(folder: Path, item: os.DirEntry[str]) -> _Entry:
    try:
        is_dir, is_file = item.is_dir(), item.is_file()
    except OSError:
        is_dir = is_file = False
    dangling = not (is_dir or is_file) and item.is_symlink() and not os.path.exists(item.path)
    return _Entry(folder / item.name, item.name, is_dir, is_file, dangling)


def _common_skip(entry: _Entry) -> Skipped | None:
    """Entries no layout can use: dangling links, unreadable things, upper-case suffixes."""
    path = entry.path
    if entry.dangling:
        return Skipped(path, "a symbolic link to nothing; fix or remove the link")
    if entry.name.startswith("."):
        return Skipped(path, "a hidden file", said=path.suffix.lower() == ".sql")
    if entry.is_file and path.suffix.lower() == ".sql" and path.suffix != ".sql":
        return Skipped(path, "the suffix must be lower-case .sql; rename it")
    return None


def _scan_flat(listing: Listing, layout: str) -> Scan:
    """pgsteady, goose, golang-migrate, dbmate, flyway, sql-migrate and tern: one file per
    migration."""
    folder, heads = listing.folder, listing.heads
    files: list[MigrationFile] = []
    skipped: list[Skipped] = []
    seen: dict[str, Path] = {}
    for entry in listing.entries:
        problem = _common_skip(entry)
        if problem is not None:
            skipped.append(problem)
            continue
        path = entry.path
        if entry.is_dir:
            skipped.append(Skipped(path, f"a subfolder; {layout} migrations are files in "
                                         f"{folder} itself"))
            continue
        found = _flat_file(path, layout, skipped, heads)
        if found is None:
            continue
        # Flyway's 1, 001 and 1.0 are one version (it refuses such a folder too)
        key = ".".join(map(str, found.order)) if layout == "flyway" else found.tag
        if key in seen:
            same = " (to Flyway, versions that differ only in leading or trailing zeros are " \
                   "one)" if layout == "flyway" else ""
            raise LayoutError(f"{path}:1: version {found.tag} is also used by "
                               f"{seen[key]}{same}; give each migration its own version")
        seen[key] = path
        files.append(found)
    files.sort(key=lambda f: f.order)
    if layout == "tern":
        for number, found in enumerate(files, start=1):
            if found.version != number:
                raise LayoutError(f"{found.path}:1: tern numbers migrations 1, 2, 3... without "
                                  f"gaps, and {number} is missing before {found.version} (tern "
                                  f"refuses this folder too); renumber the files")
    return Scan(layout, files, skipped)


def _flat_file(path: Path, layout: str, skipped: list[Skipped],
               heads: dict[Path, bytes]) -> MigrationFile | None:
    name = path.name
    if layout == "flyway" and name.endswith(".sql.conf"):
        return None  # a script's settings, read with the script
    if layout == "goose" and name.endswith(".go"):
        go = _GOOSE_GO.match(name)
        if go is None or name.endswith("_test.go"):
            skipped.append(Skipped(path, "not a goose migration (<version>_<name>.go)"))
            return None
        version = _check_version(path, go["version"])
        return MigrationFile(layout, version, str(version), (version,), go["name"], path,
                             UpPart(""), True, "", elsewhere="a Go migration, which goose runs "
                             "itself (pgsteady runs SQL)")
    if not name.endswith(".sql"):
        skipped.append(Skipped(path, "not a .sql file"))
        return None
    if layout == "golang-migrate":
        if _GOLANG_DOWN.match(name):
            return None  # the down half of a pair: not applied, not worth a warning
        match = _GOLANG_UP.match(name)
        hint = "<version>_<name>.up.sql"
    elif layout == "flyway":
        if _FLYWAY_OTHER.match(name):
            skipped.append(Skipped(path, "a Flyway repeatable, undo or baseline script; only "
                                         "versioned V<version>__<name>.sql scripts are run"))
            return None
        match = _FLYWAY.match(name)
        hint = "V<version>__<description>.sql"
    elif layout == "sql-migrate":
        text = read(path, heads)
        if not _SQL_MIGRATE_ANY.search(text):
            skipped.append(Skipped(path, "no '-- +migrate Up' or '-- +migrate Down' line"))
            return None
        up, transactional = sql_migrate_up(path, text)
        number = _LEADING_NUMBER.match(name)
        version = _check_version(path, number[1]) if number else 0
        return MigrationFile(layout, version, name, sql_migrate_order(name),
                             name.removesuffix(".sql"), path, up, transactional, text)
    elif layout == "pgsteady":
        match = _PGSTEADY_NAME.match(name)
        hint = "<version>_<name>.sql with a whole number version, like 0001_create_orgs.sql"
        if match is None:
            raise LayoutError(f"{path}:1: the name must be {hint}; rename the file")
    else:
        match = _NUMBERED.match(name)
        hint = "<version>_<name>.sql"
    if match is None:
        skipped.append(Skipped(path, f"not named {hint}"))
        return None
    text = read(path, heads)
    if layout == "flyway":
        tag, order = flyway_version(match["version"])
        version = _check_version(path, str(order[0]))
        for part in order:
            _check_version(path, str(part))
        label = match["name"].replace("_", " ")
        return MigrationFile(layout, version, tag, order, label, path, UpPart(text),
                             flyway_transactional(path, text), text)
    version = _check_version(path, match["version"])
    up_part: UpPart
    in_transaction: bool | None
    if layout == "goose":
        up_part, in_transaction = goose_up(path, text)
    elif layout == "dbmate":
        up_part, in_transaction = dbmate_up(path, text)
    elif layout == "golang-migrate":
        up_part, in_transaction = UpPart(text), None
    elif layout == "tern":
        up_part, in_transaction = tern_up(text)
    else:  # pgsteady: the source reads its own header directives
        _refuse_down_part(path, text)
        up_part, in_transaction = UpPart(text), True
    tag = match["version"] if layout == "dbmate" else str(version)
    return MigrationFile(layout, version, tag, (version,), match["name"], path, up_part,
                         in_transaction, text)


# Folder-per-migration layouts: (script in each folder, folder name pattern, the name shown,
# files the tool keeps beside the folders).
_FOLDER_LAYOUTS = {
    "prisma": ("migration.sql", _PRISMA_DIR, "Prisma", frozenset({"migration_lock.toml"})),
    "diesel": ("up.sql", _DIESEL_DIR, "Diesel", frozenset()),
}


def _scan_folders(listing: Listing, layout: str) -> Scan:
    """Prisma and Diesel: one folder per migration, its script inside."""
    script_name, pattern, tool, kept = _FOLDER_LAYOUTS[layout]
    files: list[MigrationFile] = []
    skipped: list[Skipped] = []
    seen: dict[str, Path] = {}
    for entry in listing.entries:
        problem = _common_skip(entry)
        if problem is not None:
            skipped.append(problem)
            continue
        path = entry.path
        if entry.is_file:
            if path.name not in kept:
                skipped.append(Skipped(path, f"a file; {tool} migrations are folders "
                                             f"<version>_<name>/{script_name}"))
            continue
        match = pattern.match(path.name)
        script = path / script_name
        if match is None or not script.is_file():
            skipped.append(Skipped(path, f"not a <version>_<name> folder holding "
                                         f"{script_name}"))
            continue
        text = read(script)
        if layout == "prisma":
            # Prisma orders and records migrations by folder name; the name is the history key.
            version = _check_version(script, match["version"])
            files.append(MigrationFile("prisma", version, path.name, (version,),
                                       match["name"], script, UpPart(text), None, text))
            continue
        tag = match["version"].replace("-", "")
        if tag in seen:
            raise LayoutError(f"{script}:1: version {tag} is also used by {seen[tag]}; give "
                              f"each migration its own version")
        seen[tag] = script
        # Diesel orders versions as text: digit by digit, so 10 comes before 9.
        files.append(MigrationFile("diesel", _check_version(script, tag), tag,
                                   tuple(int(d) for d in tag), match["name"], script,
                                   UpPart(text), diesel_transactional(script), text))
    files.sort(key=lambda f: (f.order, f.tag))
    return Scan(layout, files, skipped)


def scan(folder: str | Path, layout: str, listing: Listing | None = None) -> Scan:
    """Every migration of ``layout`` in ``folder``, in the tool's order, and what was skipped.
    ``listing``: the folder as :func:`detect` saw it, so it is not listed or read twice."""
    if layout not in NAMES:
        raise LayoutError(f"unknown layout {layout!r}; use one of {', '.join(NAMES)}")
    seen = listing if listing is not None else Listing.of(folder)
    return _scan_folders(seen, layout) if layout in _FOLDER_LAYOUTS \
        else _scan_flat(seen, layout)


def _head(path: Path, heads: dict[Path, bytes]) -> str:
    try:
        with path.open("rb") as handle:
            data = handle.read(_DETECT_BYTES)
    except OSError:
        return ""
    if len(data) < _DETECT_BYTES:
        heads[path] = data  # the whole file: scan need not read it again
    return data.decode("utf-8", "replace")


def detect(folder: str | Path, listing: Listing | None = None) -> str:
    """The layout of ``folder`` when its files say so unambiguously; ``pgsteady`` when no other
    tool's marks are found; LayoutError naming the candidates when several fit. Files read
    whole on the way are kept in ``listing`` for :func:`scan`."""
    path = Path(folder)
    seen = listing if listing is not None else Listing.of(path)
    found: set[str] = set()
    for entry in seen.entries:
        name = entry.name
        if entry.is_dir:
            if (entry.path / "migration.sql").is_file():
                found.add("prisma")
            elif (entry.path / "up.sql").is_file():
                found.add("diesel")
            continue
        if name == "migration_lock.toml":
            found.add("prisma")
        elif _GOLANG_UP.match(name) or _GOLANG_DOWN.match(name):
            found.add("golang-migrate")
        elif _FLYWAY.match(name):
            found.add("flyway")
        elif _NUMBERED.match(name) and entry.is_file:
            head = _head(entry.path, seen.heads)
            if re.search(r"^\s*--\s*\+goose\s+up\b", head, re.IGNORECASE | re.MULTILINE):
                found.add("goose")
            elif re.search(r"^\s*--\s*migrate:up\b", head, re.IGNORECASE | re.MULTILINE):
                found.add("dbmate")
            elif _SQL_MIGRATE_UP.search(head):
                found.add("sql-migrate")
            elif _TERN_SPLIT in head or _TERN_NO_TX.search(head):
                found.add("tern")
            else:
                found.add("pgsteady")
        elif name.endswith(".sql") and entry.is_file and not name.startswith(".") \
                and _SQL_MIGRATE_UP.search(_head(entry.path, seen.heads)):
            found.add("sql-migrate")  # sql-migrate names files as it likes
    if "tern" in found:
        found.discard("pgsteady")  # a tern file without a down part has no mark to show
    tools = found - {"pgsteady"}
    if len(tools) > 1:
        raise LayoutError(f"{path}: cannot tell the layout, it looks like "
                         f"{' and '.join(sorted(tools))}; pass --layout")
    if tools and "pgsteady" in found:
        # goose/dbmate folders whose every file has its marks are unambiguous; a mix is not
        raise LayoutError(f"{path}: cannot tell the layout: some files look like "
                         f"{next(iter(tools))} and some like plain pgsteady files; pass --layout")
    return next(iter(tools)) if tools else "pgsteady"


def up_part(path: Path, text: str, layout: str) -> tuple[UpPart, bool | None]:
    """The Up part of one file of ``layout`` and whether it runs in a transaction (None: as
    its statements allow); for lint, which gets files rather than folders."""
    if layout == "goose":
        return goose_up(path, text)
    if layout == "dbmate":
        return dbmate_up(path, text)
    if layout == "flyway":
        return UpPart(text), flyway_transactional(path, text)
    if layout in ("prisma", "golang-migrate"):
        return UpPart(text), None
    if layout == "diesel":
        return UpPart(text), diesel_transactional(path)
    if layout == "sql-migrate":
        return sql_migrate_up(path, text)
    if layout == "tern":
        return tern_up(text)
    if layout == "pgsteady":
        return UpPart(text), True
    raise LayoutError(f"unknown layout {layout!r}; use one of {', '.join(NAMES)}")
