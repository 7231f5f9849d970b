"""sql-migrate: any ``*.sql`` with ``-- +migrate Up`` / ``-- +migrate Down`` lines (exactly so,
at the start of a line); every Up section runs, keyed by file name and ordered as sql-migrate
orders them (by leading number, then by name); one transaction unless an Up line says
``notransaction`` (then statement by statement). History in ``gorp_migrations``."""

from __future__ import annotations

import re
from pathlib import Path

from pgsteady.tools._base import (
    FlatTool,
    LayoutError,
    MigrationFile,
    Skipped,
    UpPart,
    check_version,
    read,
    sql_file,
)

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import LiteralString

    from pgsteady.tools._base import Entry, LockPlace

# sql-migrate matches its marks exactly (case, spacing): so does pgsteady.
_PREFIX = "-- +migrate "
UP = re.compile(r"^-- \+migrate Up(?:[ \t]|$)", re.MULTILINE)
_ANY = re.compile(r"^-- \+migrate (?:Up|Down)(?:[ \t]|$)", re.MULTILINE)
_LEADING_NUMBER = re.compile(r"^(\d+)")


def sql_migrate_up(path: Path, text: str) -> tuple[UpPart, bool]:
    """sql-migrate: every line of every ``-- +migrate Up`` section (up to the next ``Up`` or
    ``Down`` line), the rest blanked so lines keep their numbers; ``notransaction`` on an Up
    line turns the transaction off. Other ``-- +migrate`` commands only group statements."""
    kept: list[str] = []
    direction = None
    transactional = True
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if bare.startswith(_PREFIX):
            fields = bare[len(_PREFIX):].split()
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


def sql_migrate_order(name: str) -> tuple[int, ...]:
    """sql-migrate's order: names with a leading number first, by that number, then the rest;
    ties by name (as text, code point by code point)."""
    number = _LEADING_NUMBER.match(name)
    codes = tuple(ord(c) for c in name)
    return (0, int(number[1]), *codes) if number else (1, *codes)


# The history statements (action -> statement; {} is the qualified table name, values are
# parameters).
_HISTORY_DML: dict[str, LiteralString] = {
    "record": "INSERT INTO {} (id, applied_at) VALUES (%(tag)s, now()) "
              "ON CONFLICT DO NOTHING",
    "forget": "DELETE FROM {} WHERE id = %(tag)s",
}


class SqlMigrate(FlatTool):
    name = "sql-migrate"
    display = "sql-migrate"
    stepwise = True
    alone_hint = "put it in its own file whose up line says '-- +migrate Up notransaction'"
    history_table = "gorp_migrations"
    history_order = "id"
    history_columns = frozenset({"id", "applied_at"})
    history_ddl = ("CREATE TABLE IF NOT EXISTS {} (id text NOT NULL PRIMARY KEY, "
                   "applied_at timestamp with time zone)")
    history_dml = _HISTORY_DML
    down_mark = r"--\s*\+migrate\s+down"

    def advisory_locks(self, place: LockPlace) -> tuple[int, ...]:
        """sql-migrate takes no lock of its own (two runs can overlap): nothing to add to
        pgsteady's runner lock."""
        return ()

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        return sql_migrate_up(path, text)

    def file(self, path: Path, skipped: list[Skipped],
             heads: dict[Path, bytes]) -> MigrationFile | None:
        if not sql_file(path, skipped):
            return None
        name = path.name
        text = read(path, heads)
        if not _ANY.search(text):
            skipped.append(Skipped(path, "no '-- +migrate Up' or '-- +migrate Down' line"))
            return None
        up, transactional = sql_migrate_up(path, text)
        number = _LEADING_NUMBER.match(name)
        version = check_version(path, number[1]) if number else 0
        return MigrationFile(self.name, version, name, sql_migrate_order(name),
                             name.removesuffix(".sql"), path, up, transactional, text)

    def claims_file(self, entry: Entry, head: Callable[[], str]) -> bool:
        # sql-migrate names files as it likes: any .sql file with its mark
        name = entry.name
        return (entry.is_file and name.endswith(".sql") and not name.startswith(".")
                and UP.search(head()) is not None)


TOOL = SqlMigrate()
