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
from pgsteady.tools.sqlx import no_transaction as sqlx_no_transaction

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, LiteralString

    from pgsteady.tools._base import Entry, Listing, LockPlace, Versioned

_NAME = re.compile(r"^(?P<version>\d+)_(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)\.sql$")
NUMBERED = re.compile(r"^(?P<version>\d+)_(?P<name>.+)\.sql$")
_HINT = "<version>_<name>.sql with a whole number version, like 0001_create_orgs.sql"

# Lines after which another tool's file holds its rollback: the registry's tools' marks
# (Tool.down_mark) and those of tools pgsteady does not run (MyBatis, rambler, Play). Run as
# a pgsteady file, the rollback would run right after the change.
_FOREIGN_DOWN_MARKS = (r"--\s*//\s*@UNDO", r"--\s*rambler\s+down",
                       r"(?:#\s*-*|--+)\s*(?:-+\s*)?!Downs")
_down_mark: re.Pattern[str] | None = None


def _down_marks() -> re.Pattern[str]:
    """Every down mark, compiled once (only pgsteady-layout scans need it)."""
    global _down_mark  # noqa: PLW0603 -- a cache, filled on first use
    if _down_mark is None:
        from pgsteady.tools import registry  # noqa: PLC0415 -- the registry lists us

        marks = [*_FOREIGN_DOWN_MARKS, *(mark for name in registry.NAMES
                                          if (mark := registry.get(name).down_mark))]
        _down_mark = re.compile(r"^[ \t]*(?:" + "|".join(marks) + r").*$",
                                re.IGNORECASE | re.MULTILINE)
    return _down_mark


def refuse_down_part(path: Path, text: str) -> None:
    """LayoutError for a pgsteady-layout file that holds another tool's rollback part."""
    down = _down_marks().search(text)
    if down is not None:
        from pgsteady.tools.registry import NAMES  # noqa: PLC0415 -- the registry lists us

        line = text.count("\n", 0, down.start()) + 1
        raise LayoutError(f"{path}:{line}: {down[0].strip()!r} starts a rollback part, which "
                          f"a pgsteady migration would run right after the change; pass the "
                          f"folder's tool with --tool (one of {', '.join(NAMES[1:])}), or "
                          f"move the rollback out of the file")


DIRECTIVE = re.compile(r"^\s*--\s*pgsteady\s*:\s*(?P<value>.*?)\s*$", re.IGNORECASE)
NO_TRANSACTION = "no-transaction"
DIRECTIVES = frozenset({NO_TRANSACTION})


def directives(path: Path, text: str) -> set[str]:
    """The header's directives (sqlx's ``-- no-transaction`` first line counts as
    ``no-transaction``); LayoutError for an unknown or misplaced one."""
    found: set[str] = set()
    if sqlx_no_transaction(text):
        found.add(NO_TRANSACTION)
    in_header = True
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if in_header and stripped and not stripped.startswith("--"):
            in_header = False
        match = DIRECTIVE.match(line)
        if match is None:
            continue
        value = match["value"].lower().split("--", 1)[0].strip()  # "-- why" is a comment
        if value.split(maxsplit=1)[0:1] in (["ignore"], ["ignore-file"]):
            continue  # the linter's suppressions: `-- pgsteady: ignore <rule> -- <reason>`
        if value not in DIRECTIVES:
            known = ", ".join(sorted(DIRECTIVES))
            raise LayoutError(f"{path}:{number}: unknown directive {match['value']!r}; "
                              f"known: {known}")
        if not in_header:
            raise LayoutError(f"{path}:{number}: directive {value!r} must be in the header, "
                              f"before the first statement; move it to the top")
        found.add(value)
    return found


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
    unwraps = False  # pgsteady runs each file in its own transaction: no BEGIN/COMMIT in it
    allows_empty = False
    alone_hint = f"put it alone in a file whose first line is '-- pgsteady: {NO_TRANSACTION}'"
    file_pattern = _NAME
    file_hint = _HINT
    history_table = "pgsteady_migrations"
    history_order = "version"
    history_columns = frozenset({"version", "name", "checksum", "applied_at", "duration_ms",
                                 "tries", "applied_by"})
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
    history_added = (("finished", "add_finished"),)  # a table from before the column
    start_actions = ("record",)  # the row, with finished false
    record_one_row = True  # INSERT ... ON CONFLICT DO UPDATE: one row, always

    def baseline_row(self, params: dict[str, Any]) -> None:
        params["applied_by"] = f"baseline by {params['applied_by']}"

    def advisory_locks(self, place: LockPlace) -> tuple[int, ...]:
        """pgsteady's own runner lock (``queries.RUNNER_LOCK_KEY``) is taken for every layout;
        nothing more."""
        return ()

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        # lint reads the header's no-transaction itself (and never refuses a directive)
        return UpPart(text), True

    def lint_files(self, listing: Listing, down: Callable[[Path], None],
                   other: Callable[[Path, str], None]) -> list[Path] | None:
        return None  # lint's plain walk: every .sql file, down scripts set aside

    def file(self, path: Path, skipped: list[Skipped],
             heads: dict[Path, bytes]) -> MigrationFile | None:
        if not sql_file(path, skipped):
            return None
        match = _NAME.match(path.name)
        if match is None:
            raise LayoutError(f"{path}:1: the name must be {_HINT}; rename the file")
        text = read(path, heads)
        version = check_version(path, match["version"])
        refuse_down_part(path, text)
        transactional = NO_TRANSACTION not in directives(path, text)
        return MigrationFile(self.name, version, str(version), (version,), match["name"], path,
                             UpPart(text), transactional, text)

    def claims_file(self, entry: Entry, head: Callable[[], str]) -> bool:
        return entry.is_file and NUMBERED.match(entry.name) is not None

    def read_history(self, rows: Sequence[dict[str, Any]],
                     migrations: Sequence[Versioned]) -> dict[str, Row]:
        return {str(r["version"]): Row(str(r["version"]), r["name"], r["checksum"],
                                       bool(r.get("finished", True))) for r in rows}


TOOL = Pgsteady()
