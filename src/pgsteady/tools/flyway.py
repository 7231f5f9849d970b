"""Flyway: ``V<version>__<description>.sql`` (``1``, ``1.2``, ``1_2`` = ``1.2``; compared as
Flyway compares them, ``001`` = ``1`` = ``1.0``, and written as the file writes them), one
transaction unless its statements cannot run in one (Flyway spots ``CREATE INDEX
CONCURRENTLY``, ``VACUUM`` and the like itself and then runs the script without one; it refuses
a script mixing them with other statements); ``executeInTransaction=true|false`` in a
``<file>.conf`` next to it or in a ``-- flyway:executeInTransaction=...`` header decides
instead. Repeatable ``R__<description>.sql`` scripts run after the versioned ones, again
whenever their checksum changes (rows with no version); undo (``U``) and baseline (``B``)
scripts are reported as skipped. History in ``flyway_schema_history``, with Flyway's CRC32
checksum; ``flyway repair``'s DELETE rows, BASELINE rows, repeatable rows and Java
migrations' rows (``JDBC``, ``SPRING_JDBC``: applied, no SQL file) are read as Flyway reads
them."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from pgsteady.tools._base import (
    THIS_TRY_MS,
    FlatTool,
    LockPlace,
    MigrationFile,
    Row,
    Skipped,
    UpPart,
    check_version,
    java_hash_code,
    named,
    read,
    sql_file,
)

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, LiteralString

    from pgsteady.tools._base import Entry, Versioned

NAME = re.compile(r"^V(?P<version>[0-9]+(?:[._][0-9]+)*)__(?P<name>.+)\.sql$")
REPEATABLE = re.compile(r"^R__(?P<name>.+)\.sql$")
_OTHER = re.compile(r"^(?:U\d|B\d).*__.*\.sql$")
# Flyway's row types for a migration it ran from code, not from a SQL script.
_CODE_TYPES = frozenset({"JDBC", "SPRING_JDBC", "CUSTOM", "SCRIPT"})
# Repeatables sort after every version (Flyway applies them after the versioned ones).
_AFTER_VERSIONS = 2**64
_VERSION_TEXT = re.compile(r"[0-9]+(?:\.[0-9]+)*")
_HEADER = re.compile(r"^--\s*flyway:executeInTransaction\s*=\s*(?P<value>\w+)\s*$",
                     re.IGNORECASE)


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
        match = _HEADER.match(stripped)
        if match is not None:
            return match["value"].lower() != "false"
    return None


# PostgreSQLAdvisoryLockTemplate's LOCK_MAGIC_NUM ("Flyway" in bytes); the key adds the
# hashCode of the history table's name as Flyway prints it.
FLYWAY_LOCK_BASE = (0x46 << 40) + (0x6C << 32) + (0x79 << 24) + (0x77 << 16) + (0x61 << 8) + 0x79


def flyway_lock_key(schema: str, table: str) -> int:
    """Flyway's advisory lock key for its history table ``schema.table``: the magic number
    plus Java's hashCode of ``"schema"."table"`` (quoted as Flyway quotes PostgreSQL names)."""
    def quoted(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    return FLYWAY_LOCK_BASE + java_hash_code(f"{quoted(schema)}.{quoted(table)}")


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
    if not _VERSION_TEXT.fullmatch(text):
        return None
    parts = [int(p) for p in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


# The statements Flyway's PostgreSQL parser runs outside a transaction (its patterns, on the
# statement's first words), as parse-tree kinds; the words make a quick test first.
OUTSIDE_WORDS = re.compile(
    r"\b(concurrently|database|tablespace|subscription|system|vacuum|discard|reindex)\b",
    re.IGNORECASE)
OUTSIDE_NODES = frozenset({"CreatedbStmt", "DropdbStmt", "CreateTableSpaceStmt",
                           "DropTableSpaceStmt", "CreateSubscriptionStmt",
                           "DropSubscriptionStmt", "AlterSystemStmt", "IndexStmt", "DropStmt",
                           "ReindexStmt", "VacuumStmt", "DiscardStmt"})
_REINDEX_MANY = frozenset({"REINDEX_OBJECT_SCHEMA", "REINDEX_OBJECT_SYSTEM",
                           "REINDEX_OBJECT_DATABASE"})


def keeps_out(kind: str, node: dict[str, object]) -> bool:
    """Whether Flyway's parser runs a statement (its parse-tree ``kind`` and ``node``)
    outside a transaction: ``CREATE [UNIQUE] INDEX CONCURRENTLY``, ``DROP INDEX
    CONCURRENTLY``, ``CREATE/DROP DATABASE|TABLESPACE|SUBSCRIPTION``, ``ALTER SYSTEM``,
    ``REINDEX SCHEMA|DATABASE|SYSTEM``, ``VACUUM`` or ``DISCARD ALL``."""
    if kind in ("IndexStmt", "DropStmt"):
        return bool(node.get("concurrent")) and (
            kind == "IndexStmt" or node.get("removeType") == "OBJECT_INDEX")
    if kind == "ReindexStmt":
        return node.get("kind") in _REINDEX_MANY
    if kind == "VacuumStmt":
        return bool(node.get("is_vacuumcmd"))
    if kind == "DiscardStmt":
        return node.get("target") == "DISCARD_ALL"
    return kind in OUTSIDE_NODES


# The history statements (action -> statement; {} is the qualified table name, values are
# parameters).
_HISTORY_DML: dict[str, LiteralString] = {
    "record": """
INSERT INTO {} (installed_rank, version, description, type, script, checksum, installed_by,
            execution_time, success)
SELECT coalesce(max(installed_rank), 0) + 1,
   CASE WHEN %(repeatable)s THEN NULL ELSE %(tag)s END, %(name)s, %(type)s, %(script)s,
   %(checksum)s, current_user, %(duration_ms)s + """ + THIS_TRY_MS + """, true
FROM {}""",
    "forget": "DELETE FROM {} WHERE version = %(tag)s",
    # as `flyway repair` would leave it: the file's checksum, and a failed row as applied
    "realign": "UPDATE {} SET checksum = %(checksum)s, description = %(name)s, "
               "success = true WHERE version = %(tag)s",
}


class Flyway(FlatTool):
    name = "flyway"
    display = "Flyway"
    stepwise = True
    keeps_names = True
    same_version_note = (" (to Flyway, versions that differ only in leading or trailing zeros "
                         "are one)")
    alone_hint = "put it in its own script with executeInTransaction=false in <script>.conf"
    history_table = "flyway_schema_history"
    history_order = "installed_rank"
    history_columns = frozenset({"installed_rank", "version", "description", "type", "script",
                                 "checksum", "installed_by", "installed_on", "execution_time",
                                 "success"})
    history_ddl = """
CREATE TABLE IF NOT EXISTS {} (
    installed_rank integer NOT NULL PRIMARY KEY,
    version varchar(50),
    description varchar(200) NOT NULL,
    type varchar(20) NOT NULL,
    script varchar(1000) NOT NULL,
    checksum integer,
    installed_by varchar(100) NOT NULL,
    installed_on timestamp NOT NULL DEFAULT now(),
    execution_time integer NOT NULL,
    success boolean NOT NULL
)"""
    history_dml = _HISTORY_DML
    outside_words = OUTSIDE_WORDS
    outside_nodes = OUTSIDE_NODES

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        return UpPart(text), flyway_transactional(path, text)

    def in_transaction(self, declared: bool | None, outside: Sequence[bool]) -> bool | None:
        """As Flyway decides for a script without ``executeInTransaction``: in a
        transaction when every statement can run in one, else without one; None for a
        script mixing the two, which Flyway refuses unless ``mixed=true`` (then it runs it
        statement by statement, without one)."""
        if declared is not None:
            return declared
        if not any(outside):
            return True
        return False if all(outside) else None

    def keeps_out(self, kind: str, node: dict[str, object]) -> bool:
        return keeps_out(kind, node)

    def baseline_row(self, params: dict[str, Any]) -> None:
        params["duration_ms"] = 0

    def file(self, path: Path, skipped: list[Skipped],
             heads: dict[Path, bytes]) -> MigrationFile | None:
        name = path.name
        if name.endswith(".sql.conf"):
            return None  # a script's settings, read with the script
        if not sql_file(path, skipped):
            return None
        if _OTHER.match(name):
            skipped.append(Skipped(path, "a Flyway undo or baseline script; only versioned "
                                         "V<version>__<name>.sql and repeatable R__ scripts "
                                         "are run"))
            return None
        repeatable = REPEATABLE.match(name)
        if repeatable is not None:
            text = read(path, heads)
            label = repeatable["name"].replace("_", " ")
            # keyed and ordered by description, as Flyway orders repeatables
            return MigrationFile(self.name, 0, f"R__{label}",
                                 (_AFTER_VERSIONS, *map(ord, label)), label, path,
                                 UpPart(text), flyway_transactional(path, text), text,
                                 repeatable=True)
        match = named(path, NAME, "V<version>__<description>.sql", skipped)
        if match is None:
            return None
        text = read(path, heads)
        tag, order = flyway_version(match["version"])
        version = check_version(path, str(order[0]))
        for part in order:
            check_version(path, str(part))
        label = match["name"].replace("_", " ")
        return MigrationFile(self.name, version, tag, order, label, path, UpPart(text),
                             flyway_transactional(path, text), text)

    def advisory_locks(self, place: LockPlace) -> tuple[int, ...]:
        """Flyway takes ``pg_try_advisory_xact_lock`` of its table's key around each
        migration (or a session lock, with ``flyway.postgresql.transactional.lock=false``):
        pgsteady's session lock on the same key keeps either out."""
        return tuple(flyway_lock_key(schema, place.table) for schema in place.schemas)

    def key(self, found: MigrationFile) -> str:
        # Flyway's 1, 001 and 1.0 are one version (it refuses such a folder too)
        return found.tag if found.repeatable else ".".join(map(str, found.order))

    def claims_file(self, entry: Entry, head: Callable[[], str]) -> bool:
        return NAME.match(entry.name) is not None

    def has_version(self, text: str, tag: str, version: int, order: tuple[int, ...]) -> bool:
        return flyway_order(text) == order

    def version_key(self, text: str) -> object:
        return flyway_order(text)

    def checksum(self, text: str, path: Path) -> str | None:
        return str(flyway_checksum(text))

    def read_history(self, rows: Sequence[dict[str, Any]],
                     migrations: Sequence[Versioned]) -> dict[str, Row]:
        """``flyway_schema_history`` as Flyway reads it (rows in ``installed_rank`` order).

        Versions are compared as numbers (``MigrationVersion``): the row ``001`` or ``1.0`` is
        the file ``V1__``'s, and is keyed by that file's tag. A successful ``DELETE`` row (what
        ``flyway repair`` writes for a missing migration) cancels the latest row of its
        version; a ``BASELINE`` row stands for every file up to its version; a Java
        migration's row (``JDBC``, ``SPRING_JDBC``) is applied though no file has it. A
        repeatable (``R__``, no version) is applied while its latest row's checksum is its
        file's: once the file changes, it is pending again (Flyway reruns it). The
        schema-creation marker is no migration.
        """
        files = {m.order: m for m in migrations}
        tags = {m.tag: m for m in migrations}
        by_tag: dict[str, Row] = {}
        repeatables: dict[str, Row] = {}
        for r in rows:
            checksum = None if r["checksum"] is None else str(r["checksum"])
            if r["type"] == "SCHEMA":
                continue
            if r["version"] is None:
                if r["type"] != "DELETE":
                    key = f"R__{r['description']}"
                    repeatables[key] = Row(key, r["description"], checksum, bool(r["success"]))
                continue
            text = str(r["version"])
            order = flyway_order(text)
            match = files.get(order) if order is not None else None
            key = match.tag if match is not None else text
            if r["type"] == "DELETE":
                if r["success"]:
                    by_tag.pop(key, None)
            elif r["type"] == "BASELINE":
                for m in migrations:
                    if order is not None and m.order <= order:
                        by_tag[m.tag] = Row(m.tag, m.name, m.checksum)
            else:
                code = (f"a {r['type']} migration: Flyway ran its code, which is not a SQL "
                        f"file in the folder") if r["type"] in _CODE_TYPES else None
                by_tag[key] = Row(key, r["description"], checksum, bool(r["success"]),
                                  None if text == key else text, code)
        for key, row in repeatables.items():
            file = tags.get(key)
            if file is not None and row.checksum == file.checksum:
                by_tag[key] = row  # else pending: Flyway runs it again (or it is gone)
        return by_tag


TOOL = Flyway()
