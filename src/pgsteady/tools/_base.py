"""What every migration tool's module builds on: the records a folder is read into, one look
at a folder (:class:`Listing`), and :class:`Tool`, whose attributes and methods a tool's module
fills in (naming and order, Up/Down, transactions, history table, detection).

This module imports neither psycopg nor pglast (lint imports it and must start fast).
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from pgsteady._record import Record

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Sequence
    from typing import Any, ClassVar, Final, LiteralString, Protocol

    class Versioned(Protocol):
        """A migration as a history table is read against it (``migrate.source.Migration``)."""

        @property
        def version(self) -> int: ...
        @property
        def tag(self) -> str: ...
        @property
        def name(self) -> str: ...
        @property
        def checksum(self) -> str: ...
        @property
        def order(self) -> tuple[int, ...]: ...


class LayoutError(ValueError):
    """A folder or file that does not follow its layout: ``file:line: what; how to fix``."""


MAX_VERSION = 2**63 - 1  # history tables keep versions as bigint
DETECT_BYTES = 65536  # markers are looked for in the first 64 KiB of a file

# Seconds since the try began (the runner notes when in ``pgsteady.try_started``; else since
# its transaction did): history rows sent with a migration record their own duration.
TRY_STARTED = ("coalesce(nullif(current_setting('pgsteady.try_started', true), '')"
               "::timestamptz, now())")
# Milliseconds since this try began: a migration sent in a message records its own duration
# (now() is when the message arrived, the same for every migration in it).
THIS_TRY_MS = "(extract(epoch FROM clock_timestamp() - " + TRY_STARTED + ") * 1000)::int"


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
    stops before it; ``repeatable``: it has no version and runs again whenever its
    checksum changes, after the versioned ones (Flyway's ``R__`` scripts).
    """

    __slots__ = ("elsewhere", "name", "order", "path", "repeatable", "tag", "text", "tool",
                 "transactional", "up", "version")
    _UNSHOWN = ("text",)

    def __init__(self, tool: str, version: int, tag: str, order: tuple[int, ...],  # noqa: PLR0917
                 name: str, path: Path, up: UpPart, transactional: bool | None, text: str,
                 elsewhere: str | None = None, repeatable: bool = False) -> None:
        self.tool: Final = tool
        self.version: Final = version
        self.tag: Final = tag
        self.order: Final = order
        self.name: Final = name
        self.path: Final = path
        self.up: Final = up
        self.transactional: Final = transactional
        self.text: Final = text
        self.elsewhere: Final = elsewhere
        self.repeatable: Final = repeatable


class Skipped(Record):
    """A folder entry that is not a migration of the layout, and why; ``said`` False:
    expected clutter (.gitkeep, .DS_Store), logged only with -vv."""

    __slots__ = ("path", "reason", "said")

    def __init__(self, path: Path, reason: str, said: bool = True) -> None:
        self.path: Final = path
        self.reason: Final = reason
        self.said: Final = said


class Scan(Record):
    """A folder read as one tool's."""

    __slots__ = ("files", "skipped", "tool")
    __hash__ = None  # type: ignore[assignment]  # its lists may change

    def __init__(self, tool: str, files: list[MigrationFile], skipped: list[Skipped],
                 ) -> None:
        self.tool = tool
        self.files = files
        self.skipped = skipped


class Row(Record):
    """An applied (or started) migration as the history table has it, keyed by ``tag``.

    ``stored``: the version as the table holds it, where that differs from ``tag`` (Flyway's
    ``1.0`` is the file ``V1__``'s row): what a change to the row must look for;
    ``elsewhere``: why no file in the folder is expected for it (Flyway's Java migrations).
    """

    __slots__ = ("checksum", "elsewhere", "finished", "name", "stored", "tag")

    def __init__(self, tag: str, name: str | None = None, checksum: str | None = None,  # noqa: PLR0917
                 finished: bool = True, stored: str | None = None,
                 elsewhere: str | None = None) -> None:
        self.tag: Final = tag
        self.name: Final = name
        self.checksum: Final = checksum
        self.finished: Final = finished
        self.stored: Final = stored
        self.elsewhere: Final = elsewhere


def lines_between(text: str, start_line: int, end_line: int | None) -> str:
    """Lines ``start_line`` up to (not including) ``end_line`` of ``text``, whole."""
    lines = text.splitlines(keepends=True)
    return "".join(lines[start_line - 1:None if end_line is None else end_line - 1])


def check_version(path: Path, digits: str) -> int:
    """``digits`` as a version a history table can keep; LayoutError if it is too large."""
    version = int(digits)
    if version > MAX_VERSION:
        raise LayoutError(f"{path}:1: version {digits} is too large (the history keeps a "
                           f"bigint, at most {MAX_VERSION}); use a smaller number")
    return version


def read(path: Path, heads: dict[Path, bytes] | None = None) -> str:
    """A migration file as text; LayoutError naming the file if it is not UTF-8. ``heads``:
    files already read whole (:func:`registry.detect`), used once and dropped."""
    try:
        data = heads.pop(path, None) if heads else None
        if data is None:
            return path.read_text(encoding="utf-8-sig")
        return data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise LayoutError(f"{path}:1: cannot read it as UTF-8 text ({exc}); fix the file") \
            from None


class LockPlace(Record):
    """Where a run keeps its history, as tools derive their migration lock keys from it:
    the history table's ``schema`` and ``table``, the ``database`` connected to
    (``current_database()``) and the session's ``current_schema()``."""

    __slots__ = ("current_schema", "database", "schema", "table")

    def __init__(self, database: str, current_schema: str, schema: str, table: str) -> None:
        self.database: Final = database
        self.current_schema: Final = current_schema
        self.schema: Final = schema
        self.table: Final = table

    @property
    def schemas(self) -> tuple[str, ...]:
        """The history's schema, and ``current_schema()`` when it differs: a tool left to its
        default uses the latter, one configured like pgsteady the former."""
        return tuple(dict.fromkeys((self.schema, self.current_schema)))


def go_advisory_lock_id(*names: str) -> int:
    """golang-migrate's ``GenerateAdvisoryLockId``: crc32 (IEEE) of the names joined by NUL,
    times 1486364155, wrapping as Go's uint32 does (so never negative)."""
    return (zlib.crc32("\x00".join(names).encode("utf-8")) * 1486364155) & 0xFFFFFFFF


def java_hash_code(text: str) -> int:
    """Java's ``String.hashCode()``: ``31*h + c`` over the UTF-16 code units, as a signed
    32-bit int (Flyway derives its lock key from it)."""
    units = text.encode("utf-16-be")
    value = 0
    for at in range(0, len(units), 2):
        value = (31 * value + int.from_bytes(units[at:at + 2], "big")) & 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


# --- folders ---------------------------------------------------------------------------------


class Entry(Record):
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


def _entries(folder: Path) -> list[Entry]:
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


def _entry(folder: Path, item: os.DirEntry[str]) -> Entry:
    try:
        is_dir, is_file = item.is_dir(), item.is_file()
    except OSError:
        is_dir = is_file = False
    dangling = not (is_dir or is_file) and item.is_symlink() and not os.path.exists(item.path)
    return Entry(folder / item.name, item.name, is_dir, is_file, dangling)


class Listing:
    """One look at a folder, shared by detection and scanning: its entries, and the files
    detection read whole (used once by the scan, then dropped)."""

    __slots__ = ("entries", "folder", "heads")

    def __init__(self, folder: Path, entries: list[Entry] | None = None,
                 heads: dict[Path, bytes] | None = None) -> None:
        self.folder = folder
        self.entries: list[Entry] = [] if entries is None else entries
        self.heads: dict[Path, bytes] = {} if heads is None else heads

    @classmethod
    def of(cls, folder: str | Path) -> Listing:
        path = Path(folder)
        return cls(path, _entries(path))

    def head(self, path: Path) -> str:
        """The first 64 KiB of ``path`` as text (a file shorter than that is kept whole in
        :attr:`heads`, so a scan need not read it again)."""
        try:
            with path.open("rb") as handle:
                data = handle.read(DETECT_BYTES)
        except OSError:
            return ""
        if len(data) < DETECT_BYTES:
            self.heads[path] = data
        return data.decode("utf-8", "replace")


def common_skip(entry: Entry) -> Skipped | None:
    """Entries no layout can use: dangling links, unreadable things, upper-case suffixes."""
    path = entry.path
    if entry.dangling:
        return Skipped(path, "a symbolic link to nothing; fix or remove the link")
    if entry.name.startswith("."):
        return Skipped(path, "a hidden file", said=path.suffix.lower() == ".sql")
    if entry.is_file and path.suffix.lower() == ".sql" and path.suffix != ".sql":
        return Skipped(path, "the suffix must be lower-case .sql; rename it")
    return None


# --- tools -----------------------------------------------------------------------------------


class Tool:
    """One migration tool's conventions; each module of :mod:`pgsteady.tools` makes one.

    ``name``: as ``--tool`` takes it; ``display``: as people write it (Prisma, Flyway);
    ``migrates``: ``pgsteady migrate`` runs its folders (else lint only judges its files);
    ``sets_timeouts``: the tool sets lock_timeout and statement_timeout itself (lint);
    ``stepwise``: a no-transaction file runs statement by statement, each committing on its
    own; ``numeric``: its versions are numbers (shown as such); ``keeps_names``: its history
    holds each migration's name (a rename is a change); ``hides_plain``: a folder with one of
    its files is its, even where other files carry no mark; ``unwraps``: a file's own
    ``BEGIN; ... COMMIT;`` is dropped under the tool's transaction (pgsteady's files may not
    hold one); ``allows_empty``: a file without a statement is a migration the tool records.

    History: ``history_table`` (the tool's default name; None: it keeps none pgsteady knows),
    ``history_order`` (the column rows are read in), ``history_ddl`` and ``history_seed``
    (``{}`` is the qualified table), ``history_dml`` (action -> statement);
    ``writes_history``: pgsteady writes it (Alembic's it only reads); ``history_added``:
    (column, action) for columns an older table lacks; ``start_actions``: the statements
    that mark a migration started before it runs outside a transaction (none: the table
    cannot say so); ``record_actions``: those recording it applied; ``record_one_row``: the
    record statement returns exactly one row (so it can read the try's clock as well).
    """

    name: ClassVar[str] = ""
    display: ClassVar[str] = ""
    migrates: ClassVar[bool] = True
    sets_timeouts: ClassVar[bool] = False
    stepwise: ClassVar[bool] = False
    numeric: ClassVar[bool] = False
    keeps_names: ClassVar[bool] = False
    hides_plain: ClassVar[bool] = False
    unwraps: ClassVar[bool] = True
    allows_empty: ClassVar[bool] = True
    #: The SQL to judge comes from the project, not from files (Django writes it).
    sql_from_project: ClassVar[bool] = False
    #: How to run a statement that cannot run in a transaction (None: the generic advice).
    alone_hint: ClassVar[str | None] = None
    #: What the summary adds when detection picked the tool from names others share.
    guess_note: ClassVar[str] = ""
    #: A line that starts a file's rollback part (a regular expression; None: none).
    down_mark: ClassVar[str | None] = None
    history_table: ClassVar[str | None] = None
    history_order: ClassVar[str] = ""
    history_ddl: ClassVar[LiteralString] = ""
    history_seed: ClassVar[LiteralString | None] = None
    history_dml: ClassVar[dict[str, LiteralString]] = {}
    writes_history: ClassVar[bool] = True
    history_added: ClassVar[tuple[tuple[str, str], ...]] = ()
    start_actions: ClassVar[tuple[str, ...]] = ()
    record_actions: ClassVar[tuple[str, ...]] = ("record",)
    record_one_row: ClassVar[bool] = False
    #: The columns that tell the tool's history table from another tool's of the same name.
    history_columns: ClassVar[frozenset[str]] = frozenset()
    #: Detections this tool refines when :meth:`claims_folder` says so (sqlx's files are
    #: named as pgsteady's or golang-migrate's; its crate tells it apart).
    refines: ClassVar[tuple[str, ...]] = ()
    #: Statements the tool itself keeps out of a transaction, for lint (Flyway's parser):
    #: words that may start one (a quick test), and the parse-tree kinds to look at.
    outside_words: ClassVar[re.Pattern[str] | None] = None
    outside_nodes: ClassVar[frozenset[str]] = frozenset()

    def keeps_out(self, kind: str, node: dict[str, object]) -> bool:
        """Whether the tool runs this statement (parse-tree ``kind`` and ``node``) outside a
        transaction by itself (see :attr:`outside_words`)."""
        return False

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        """The Up part of one file and whether it runs in a transaction (None: as its
        statements allow)."""
        return UpPart(text), None

    def in_transaction(self, declared: bool | None, outside: Sequence[bool]) -> bool | None:
        """Whether a file runs in a transaction, from what it declares (None: nothing) and,
        for each of its statements as the caller parsed them, whether it cannot run in one.
        None: the tool refuses such a file by default (Flyway's mix of both kinds).

        The default is a file sent as one multi-statement query, which PostgreSQL runs as
        one implicit transaction: only a lone statement runs outside one."""
        if declared is not None:
            return declared
        return not (len(outside) == 1 and outside[0])

    def advisory_locks(self, place: LockPlace) -> tuple[int, ...]:
        """The keys (one-bigint form) of the advisory locks the tool takes while it migrates
        a database whose history is at ``place``: taken by pgsteady as well, so the tool and
        ``pgsteady migrate`` cannot run at once. Empty: the tool takes none."""
        return ()

    def scan(self, listing: Listing) -> Scan:
        """Every migration of the folder, in the tool's order, and what was skipped."""
        raise LayoutError(f"{listing.folder}: pgsteady does not run {self.display}'s folders")

    def lint_files(self, listing: Listing, down: Callable[[Path], None],
                   other: Callable[[Path, str], None]) -> list[Path] | None:
        """The files of a folder lint judges, in the tool's order; None: every ``.sql`` file,
        sorted (lint's plain walk). Down scripts go to ``down``, the ``.sql`` files the tool
        does not run to ``other`` with the reason."""
        if not self.migrates:
            return None
        scan = self.scan(listing)
        for item in scan.skipped:
            if item.said and item.path.suffix == ".sql" and item.path.is_file():
                other(item.path, item.reason)
        for found in scan.files:
            if found.elsewhere is not None:
                other(found.path, "")
        return [f.path for f in scan.files if f.elsewhere is None]

    def claims_folder(self, listing: Listing, head: Callable[[Path], str]) -> bool:
        """Whether the folder as a whole (``head``: a file's first 64 KiB) is this tool's,
        where another tool's detection (:attr:`refines`) would have it."""
        return False

    def claims_dir(self, entry: Entry) -> bool:
        """Whether a subfolder marks the folder as this tool's (detection)."""
        return False

    def claims_file(self, entry: Entry, head: Callable[[], str]) -> bool:
        """Whether a file (``head``: its first 64 KiB, read on demand) marks the folder as
        this tool's (detection; asked in the registry's order, the first claim wins)."""
        return False

    def label(self, path: Path, tag: str) -> str:
        """A migration as messages name it."""
        return path.name

    def has_version(self, text: str, tag: str, version: int,
                    order: tuple[int, ...]) -> bool:
        """Whether ``text`` is this migration's version as the tool reads it."""
        return text in (tag, str(version))

    def version_key(self, text: str) -> object:
        """What two versions compare equal by (``--accept`` of a row without a file)."""
        return None

    def checksum(self, text: str, path: Path) -> str | None:
        """The checksum the tool keeps of a file (``text``, read from ``path``); None:
        sha-256 of its text (pgsteady's)."""
        return None

    def row_id(self) -> str | None:
        """A new history row's id, where the tool gives each row one (Prisma)."""
        return None

    def baseline_row(self, params: dict[str, Any]) -> None:
        """Adjust a history row's values for a migration recorded without running
        (``--baseline``, ``--accept``), as the tool itself would write it."""

    def read_history(self, rows: Sequence[dict[str, Any]],
                     migrations: Sequence[Versioned]) -> dict[str, Row]:
        """Applied (or started and unfinished) migrations by tag, from the table's rows
        (oldest first), as the tool counts them."""
        column = self.history_order
        return {str(r[column]): Row(str(r[column])) for r in rows}


class FlatTool(Tool):
    """A tool whose folder holds one file per migration: ``file_pattern`` (groups
    ``version`` and ``name``; ``file_hint`` says it in words) names them; files matching
    ``quiet_pattern`` (the down half of a pair) are passed over without a word."""

    #: Versions equal to the tool though written differently (Flyway's 1 and 1.0).
    same_version_note: ClassVar[str] = ""
    file_pattern: ClassVar[re.Pattern[str]]
    file_hint: ClassVar[str] = "<version>_<name>.sql"
    quiet_pattern: ClassVar[re.Pattern[str] | None] = None

    def file(self, path: Path, skipped: list[Skipped],
             heads: dict[Path, bytes]) -> MigrationFile | None:
        """One folder file as a migration; None (and, when worth saying, a :class:`Skipped`)
        when it is not one."""
        if not sql_file(path, skipped):
            return None
        if self.quiet_pattern is not None and self.quiet_pattern.match(path.name):
            return None  # the down half of a pair: not applied, not worth a warning
        match = named(path, self.file_pattern, self.file_hint, skipped)
        if match is None:
            return None
        text = read(path, heads)
        version = check_version(path, match["version"])
        up, transactional = self.up_part(path, text)
        return MigrationFile(self.name, version, self.tag_of(match["version"], version),
                             (version,), self.name_of(match["name"]), path, up, transactional,
                             text)

    def name_of(self, raw: str) -> str:
        """The migration's name as the history keeps it, from the file name's part."""
        return raw

    def tag_of(self, digits: str, version: int) -> str:
        """The version as the history writes it (dbmate: as the file name does)."""
        return str(version)

    def key(self, found: MigrationFile) -> str:
        """What two files of one version share."""
        return found.tag

    def check_order(self, files: list[MigrationFile]) -> None:
        """LayoutError when the sorted files break the tool's rules (tern's gaps)."""

    def scan(self, listing: Listing) -> Scan:
        folder, heads = listing.folder, listing.heads
        files: list[MigrationFile] = []
        skipped: list[Skipped] = []
        seen: dict[str, Path] = {}
        for entry in listing.entries:
            problem = common_skip(entry)
            if problem is not None:
                skipped.append(problem)
                continue
            path = entry.path
            if entry.is_dir:
                skipped.append(Skipped(path, f"a subfolder; {self.name} migrations are files "
                                             f"in {folder} itself"))
                continue
            found = self.file(path, skipped, heads)
            if found is None:
                continue
            key = self.key(found)
            if key in seen:
                raise LayoutError(f"{path}:1: version {found.tag} is also used by "
                                  f"{seen[key]}{self.same_version_note}; give each migration "
                                  f"its own version")
            seen[key] = path
            files.append(found)
        files.sort(key=lambda f: f.order)
        self.check_order(files)
        return Scan(self.name, files, skipped)


def sql_file(path: Path, skipped: list[Skipped]) -> bool:
    """Whether ``path`` is a ``.sql`` file (if not, it is skipped and said)."""
    if path.name.endswith(".sql"):
        return True
    skipped.append(Skipped(path, "not a .sql file"))
    return False


def named(path: Path, pattern: re.Pattern[str], hint: str,
          skipped: list[Skipped]) -> re.Match[str] | None:
    """``pattern``'s match of the file name; None (and a :class:`Skipped`) if it does not."""
    match = pattern.match(path.name)
    if match is None:
        skipped.append(Skipped(path, f"not named {hint}"))
    return match


class FolderTool(Tool):
    """A tool whose folder holds one subfolder per migration, its script inside."""

    script_name: ClassVar[str] = ""
    folder_pattern: ClassVar[re.Pattern[str]]
    #: Files the tool keeps beside the folders.
    kept: ClassVar[frozenset[str]] = frozenset()

    def migration(self, script: Path, match: re.Match[str], text: str,
                  seen: dict[str, Path]) -> MigrationFile:
        """One migration folder's script as a migration."""
        raise NotImplementedError

    def sort_key(self, found: MigrationFile) -> tuple[object, ...]:
        return (found.order, found.tag)

    def scan(self, listing: Listing) -> Scan:
        files: list[MigrationFile] = []
        skipped: list[Skipped] = []
        seen: dict[str, Path] = {}
        for entry in listing.entries:
            problem = common_skip(entry)
            if problem is not None:
                skipped.append(problem)
                continue
            path = entry.path
            if entry.is_file:
                if path.name not in self.kept:
                    skipped.append(Skipped(path, f"a file; {self.display} migrations are "
                                                 f"folders <version>_<name>/{self.script_name}"))
                continue
            match = self.folder_pattern.match(path.name)
            script = path / self.script_name
            if match is None or not script.is_file():
                skipped.append(Skipped(path, f"not a <version>_<name> folder holding "
                                             f"{self.script_name}"))
                continue
            files.append(self.migration(script, match, read(script), seen))
        files.sort(key=self.sort_key)
        return Scan(self.name, files, skipped)
