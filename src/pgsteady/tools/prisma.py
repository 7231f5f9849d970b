"""Prisma: ``<timestamp>_<name>/migration.sql``, ordered by folder name (the name is the
history key). Prisma sends the whole file as one multi-statement query, which PostgreSQL runs
as one implicit transaction; a file holding one statement that cannot run in a transaction
runs alone. History in ``_prisma_migrations``, a row started before and finished after."""

from __future__ import annotations

import re
from pathlib import Path

from pgsteady.tools._base import (
    FolderTool,
    LockPlace,
    MigrationFile,
    Row,
    UpPart,
    check_version,
)

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, LiteralString

    from pgsteady.tools._base import Entry, Versioned


PRISMA_LOCK = 72707369  # the schema engine's advisory lock key

# The history statements (action -> statement; {} is the qualified table name, values are
# parameters).
_HISTORY_DML: dict[str, LiteralString] = {
    "unstart": "DELETE FROM {} WHERE migration_name = %(tag)s AND finished_at IS NULL",
    "start": """
INSERT INTO {} (id, checksum, migration_name, started_at, applied_steps_count)
SELECT %(id)s::varchar, %(checksum)s::varchar, %(tag)s::varchar, now(), 0
WHERE NOT EXISTS (SELECT 1 FROM {} WHERE migration_name = %(tag)s::varchar AND finished_at IS NULL
              AND rolled_back_at IS NULL)""",
    "record": """
WITH done AS (
UPDATE {} SET finished_at = now(), applied_steps_count = 1
WHERE migration_name = %(tag)s::varchar AND finished_at IS NULL AND rolled_back_at IS NULL
RETURNING 1)
INSERT INTO {} (id, checksum, finished_at, migration_name, started_at, applied_steps_count)
SELECT %(id)s::varchar, %(checksum)s::varchar, now(), %(tag)s::varchar, now(), 1
WHERE NOT EXISTS (SELECT 1 FROM done)""",
    "forget": "DELETE FROM {} WHERE migration_name = %(tag)s",
    # as `prisma migrate resolve --applied`: a failed (unfinished) row counts as applied
    "realign": "UPDATE {} SET checksum = %(checksum)s, finished_at = "
               "coalesce(finished_at, now()) WHERE migration_name = %(tag)s "
               "AND rolled_back_at IS NULL",
}


class Prisma(FolderTool):
    name = "prisma"
    display = "Prisma"
    script_name = "migration.sql"
    # the name may be empty: `prisma migrate dev --name ""` makes `<timestamp>_`, which
    # Prisma applies like any other
    folder_pattern = re.compile(r"^(?P<version>\d+)_(?P<name>.*)$")
    kept = frozenset({"migration_lock.toml"})
    history_table = "_prisma_migrations"
    history_order = "started_at"
    history_columns = frozenset({"id", "checksum", "finished_at", "migration_name", "started_at",
                                 "applied_steps_count"})
    history_ddl = """
CREATE TABLE IF NOT EXISTS {} (
    id varchar(36) PRIMARY KEY NOT NULL,
    checksum varchar(64) NOT NULL,
    finished_at timestamptz,
    migration_name varchar(255) NOT NULL,
    logs text,
    rolled_back_at timestamptz,
    started_at timestamptz NOT NULL DEFAULT now(),
    applied_steps_count integer NOT NULL DEFAULT 0
)"""
    history_dml = _HISTORY_DML
    start_actions = ("start",)  # a row without finished_at, as Prisma starts one

    def row_id(self) -> str | None:
        """A random id, as Prisma gives each row (uuid is imported only for Prisma)."""
        import uuid  # noqa: PLC0415 - its import costs every migrate start ~2 ms

        return str(uuid.uuid4())

    def migration(self, script: Path, match: re.Match[str], text: str,
                  seen: dict[str, Path]) -> MigrationFile:
        # Prisma orders and records migrations by folder name; the name is the history key.
        version = check_version(script, match["version"])
        return MigrationFile(self.name, version, script.parent.name, (version,), match["name"],
                             script, UpPart(text), None, text)

    def advisory_locks(self, place: LockPlace) -> tuple[int, ...]:
        """``prisma migrate deploy`` and ``resolve`` hold ``pg_advisory_lock(72707369)``
        (one key for every database and schema) while they run."""
        return (PRISMA_LOCK,)

    def claims_dir(self, entry: Entry) -> bool:
        return (entry.path / "migration.sql").is_file()

    def claims_file(self, entry: Entry, head: Callable[[], str]) -> bool:
        return entry.name == "migration_lock.toml"

    def label(self, path: Path, tag: str) -> str:
        return tag

    def read_history(self, rows: Sequence[dict[str, Any]],
                     migrations: Sequence[Versioned]) -> dict[str, Row]:
        by_tag: dict[str, Row] = {}
        for r in rows:
            if r["rolled_back_at"] is not None:
                continue
            by_tag[r["migration_name"]] = Row(r["migration_name"], None, r["checksum"],
                                              r["finished_at"] is not None)
        return by_tag


TOOL = Prisma()
