"""sqlx (``sqlx migrate run``, ``sqlx::migrate!``): ``<version>_<description>.sql``, or the
reversible ``<version>_<description>.up.sql`` beside its ``.down.sql``; the version is the
part before the first ``_`` and the description the rest, ``_`` read as a space. Each file
runs in a transaction unless it starts with ``-- no-transaction``; then it is sent as it is,
one multi-statement query (one implicit transaction; a lone statement runs alone). History
in ``_sqlx_migrations`` exactly as sqlx writes it: the version, the description,
``success``, the SHA-384 of the file's bytes as ``checksum`` and ``execution_time`` in
nanoseconds. sqlx sets no lock_timeout or statement_timeout; it holds
``pg_advisory_lock`` of a key made from the database's name while it migrates."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from pgsteady.tools._base import TRY_STARTED, FlatTool, Row, UpPart

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, LiteralString

    from pgsteady.tools._base import Listing, LockPlace, Versioned

# The first line pgsteady's own layout and lint honour as sqlx's (a whole line).
NO_TRANSACTION = re.compile(r"-- no-transaction[ \t]*(?:\n|$)")
_NAME = re.compile(r"^(?P<version>\d+)_(?P<name>.+?)(?:\.up)?\.sql$")
_DOWN = re.compile(r"^\d+_.+\.down\.sql$")
# sqlx's generate_lock_id: 0x3d32ad9e times the CRC32 (IEEE) of the database's name.
_LOCK_FACTOR = 0x3D32AD9E
# Nanoseconds since this try began (sqlx's execution_time is in nanoseconds).
_THIS_TRY_NS = ("(extract(epoch FROM clock_timestamp() - " + TRY_STARTED
                + ") * 1000000000)::bigint")


def no_transaction(text: str) -> bool:
    """Whether a file starts with sqlx's ``-- no-transaction`` line."""
    return NO_TRANSACTION.match(text) is not None


def sqlx_lock_key(database: str) -> int:
    """The key of sqlx's migration lock on ``database``."""
    return _LOCK_FACTOR * zlib.crc32(database.encode("utf-8"))


# The history statements (action -> statement; {} is the qualified table name, values are
# parameters).
_HISTORY_DML: dict[str, LiteralString] = {
    "record": """
INSERT INTO {} (version, description, success, checksum, execution_time)
VALUES (%(version)s, %(name)s, true, decode(%(checksum)s, 'hex'),
        %(duration_ms)s::bigint * 1000000 + """ + _THIS_TRY_NS + ")",
    "forget": "DELETE FROM {} WHERE version = %(version)s",
    # as `sqlx migrate` would accept it: the file's checksum, a failed row as applied
    "realign": "UPDATE {} SET checksum = decode(%(checksum)s, 'hex'), success = true "
               "WHERE version = %(version)s",
}


class Sqlx(FlatTool):
    name = "sqlx"
    display = "sqlx"
    numeric = True
    file_pattern = _NAME
    file_hint = "<version>_<description>.sql"
    quiet_pattern = _DOWN
    history_table = "_sqlx_migrations"
    history_order = "version"
    history_ddl = """
CREATE TABLE IF NOT EXISTS {} (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    installed_on TIMESTAMPTZ NOT NULL DEFAULT now(),
    success BOOLEAN NOT NULL,
    checksum BYTEA NOT NULL,
    execution_time BIGINT NOT NULL
)"""
    history_dml = _HISTORY_DML
    history_columns = frozenset({"version", "description", "installed_on", "success",
                                 "checksum", "execution_time"})
    refines = ("pgsteady", "golang-migrate")

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        # sqlx tests the text's start, nothing more; then the file is one simple query
        return UpPart(text), None if text.startswith("-- no-transaction") else True

    def name_of(self, raw: str) -> str:
        return raw.replace("_", " ")

    def checksum(self, text: str, path: Path) -> str | None:
        """SHA-384 of the file's bytes (what sqlx hashes: the file as read, BOM and line
        ends included)."""
        import hashlib  # noqa: PLC0415 -- migrate only; lint never asks

        return hashlib.sha384(path.read_bytes()).hexdigest()

    def advisory_locks(self, place: LockPlace) -> tuple[int, ...]:
        """``sqlx migrate run`` holds ``pg_advisory_lock`` of :func:`sqlx_lock_key`."""
        return (sqlx_lock_key(place.database),)

    def claims_folder(self, listing: Listing, head: Callable[[Path], str]) -> bool:
        """A Rust crate's folder (``Cargo.toml`` beside it or one level up), or a file whose
        first line is sqlx's ``-- no-transaction``."""
        folder = listing.folder.resolve()
        if any((place / "Cargo.toml").is_file() for place in (folder.parent,
                                                              folder.parent.parent)):
            return True
        return any(entry.is_file and _NAME.match(entry.name) and no_transaction(
            head(entry.path)) for entry in listing.entries)

    def read_history(self, rows: Sequence[dict[str, Any]],
                     migrations: Sequence[Versioned]) -> dict[str, Row]:
        by_tag: dict[str, Row] = {}
        for r in rows:
            checksum = str(r["checksum"]).removeprefix("\\x")  # bytea as jsonb text
            by_tag[str(r["version"])] = Row(str(r["version"]), r["description"], checksum,
                                            bool(r["success"]))
        return by_tag


TOOL = Sqlx()
