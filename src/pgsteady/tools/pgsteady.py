"""pgsteady's own layout: ``<version>_<name>.sql``; one transaction per file unless its header
says ``-- pgsteady: no-transaction`` (sqlx's ``-- no-transaction`` first line likewise: see
:mod:`.sqlx`); history in ``pgsteady_migrations``, with each file's name, sha-256 checksum,
duration, tries and whether it finished."""

from __future__ import annotations

import re
from pathlib import Path

from pgsteady.tools._base import (
    THIS_TRY_MS,
    FlatTool,
    LayoutError,
    MigrationFile,
    Row,
    Skipped,
    UpPart,
    check_version,
    read,
    sql_file,
)

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, LiteralString

    from pgsteady.tools._base import Entry, LockPlace, Versioned

_NAME = re.compile(r"^(?P<version>\d+)_(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)\.sql$")
NUMBERED = re.compile(r"^(?P<version>\d+)_(?P<name>.+)\.sql$")
_HINT = "<version>_<name>.sql with a whole number version, like 0001_create_orgs.sql"

# Lines after which another tool's file holds its rollback (MyBatis, rambler, Play, and the
# other tools' layouts): run as a pgsteady file, the rollback would run right after the change.
# (Compiled on first use, by re's cache: only pgsteady-layout scans need it.)
_DOWN_MARK = (
    r"^[ \t]*(?:--\s*//\s*@UNDO|--\s*rambler\s+down|(?:#\s*-*|--+)\s*(?:-+\s*)?!Downs|"
    r"--\s*\+goose\s+down|--\s*migrate:down|--\s*\+migrate\s+down|"
    r".*---- create above / drop below ----).*$")


def refuse_down_part(path: Path, text: str) -> None:
    """LayoutError for a pgsteady-layout file that holds another tool's rollback part."""
    down = re.search(_DOWN_MARK, text, re.IGNORECASE | re.MULTILINE)
    if down is not None:
        from pgsteady.tools.registry import NAMES  # noqa: PLC0415 -- the registry lists us

        line = text.count("\n", 0, down.start()) + 1
        raise LayoutError(f"{path}:{line}: {down[0].strip()!r} starts a rollback part, which "
                          f"a pgsteady migration would run right after the change; pass the "
                          f"folder's tool with --tool (one of {', '.join(NAMES[1:])}), or "
                          f"move the rollback out of the file")


# The history statements (action -> statement; {} is the qualified table name, values are
# parameters).
_HISTORY_DML: dict[str, LiteralString] = {
    "record": """
INSERT INTO {} (version, name, checksum, duration_ms, tries, applied_by, finished)
VALUES (%(version)s, %(name)s, %(checksum)s, %(duration_ms)s + """ + THIS_TRY_MS + """,
    %(tries)s, %(applied_by)s, %(finished)s)
ON CONFLICT (version) DO UPDATE SET name = excluded.name, checksum = excluded.checksum,
applied_at = now(), duration_ms = excluded.duration_ms, tries = excluded.tries,
applied_by = excluded.applied_by, finished = excluded.finished""",
    "unstart": "DELETE FROM {} WHERE version = %(version)s AND NOT finished",
    "forget": "DELETE FROM {} WHERE version = %(version)s",
    "realign": "UPDATE {} SET name = %(name)s, checksum = %(checksum)s, "
               "finished = true WHERE version = %(version)s",
    "add_finished":
        "ALTER TABLE {} ADD COLUMN IF NOT EXISTS finished boolean NOT NULL DEFAULT true",
}


class Pgsteady(FlatTool):
    name = "pgsteady"
    display = "pgsteady"
    sets_timeouts = True
    numeric = True
    keeps_names = True
    history_table = "pgsteady_migrations"
    history_order = "version"
    history_ddl = """
CREATE TABLE IF NOT EXISTS {} (
    version     bigint PRIMARY KEY,
    name        text NOT NULL,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    duration_ms integer NOT NULL,
    tries       integer NOT NULL,
    applied_by  text NOT NULL,
    finished    boolean NOT NULL DEFAULT true
)"""
    history_dml = _HISTORY_DML

    def advisory_locks(self, place: LockPlace) -> tuple[int, ...]:
        """pgsteady's own runner lock (``queries.RUNNER_LOCK_KEY``) is taken for every layout;
        nothing more."""
        return ()

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        return UpPart(text), True

    def file(self, path: Path, skipped: list[Skipped],
             heads: dict[Path, bytes]) -> MigrationFile | None:
        if not sql_file(path, skipped):
            return None
        match = _NAME.match(path.name)
        if match is None:
            raise LayoutError(f"{path}:1: the name must be {_HINT}; rename the file")
        text = read(path, heads)
        version = check_version(path, match["version"])
        refuse_down_part(path, text)  # the source reads its own header directives
        return MigrationFile(self.name, version, str(version), (version,), match["name"], path,
                             UpPart(text), True, text)

    def claims_file(self, entry: Entry, head: Callable[[], str]) -> bool:
        return entry.is_file and NUMBERED.match(entry.name) is not None

    def read_history(self, rows: Sequence[dict[str, Any]],
                     migrations: Sequence[Versioned]) -> dict[str, Row]:
        return {str(r["version"]): Row(str(r["version"]), r["name"], r["checksum"],
                                       bool(r.get("finished", True))) for r in rows}


TOOL = Pgsteady()
