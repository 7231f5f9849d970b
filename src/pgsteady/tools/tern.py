"""tern: ``<number>_<name>.sql`` numbered 1, 2, 3... without gaps; what comes before ``----
create above / drop below ----`` runs (the text exactly, wherever it is, as tern splits); one
transaction unless that part has the line ``---- tern: disable-tx ----`` (then statement by
statement). History in ``schema_version``: one row, the current version."""

from __future__ import annotations

import re
from pathlib import Path

from pgsteady.tools._base import FlatTool, LayoutError, LockPlace, MigrationFile, Row, UpPart
from pgsteady.tools.pgsteady import NUMBERED

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, LiteralString

    from pgsteady.tools._base import Entry, Versioned

# tern matches its marks exactly (case, spacing): so does pgsteady.
SPLIT = "---- create above / drop below ----"
NO_TX = re.compile(r"^---- tern: disable-tx ----$", re.MULTILINE)
TERN_LOCK = 9628173550095224  # tern's Migrator holds pg_advisory_lock of this while it runs


def tern_up(text: str) -> tuple[UpPart, bool]:
    """tern: the text before ``---- create above / drop below ----`` (all of a file without
    it), in a transaction unless it has the line ``---- tern: disable-tx ----``."""
    at = text.find(SPLIT)
    up = text if at < 0 else text[:at]
    return UpPart(up), NO_TX.search(up) is None


# The history statements (action -> statement; {} is the qualified table name, values are
# parameters).
_HISTORY_DML: dict[str, LiteralString] = {"record": "UPDATE {} SET version = %(version)s"}


class Tern(FlatTool):
    name = "tern"
    display = "tern"
    stepwise = True
    numeric = True
    hides_plain = True  # a tern file without a down part has no mark to show
    alone_hint = "put it in a file whose first line is '---- tern: disable-tx ----'"
    history_table = "schema_version"
    history_order = "version"
    history_columns = frozenset({"version"})
    history_ddl = "CREATE TABLE IF NOT EXISTS {} (version int4 NOT NULL PRIMARY KEY)"
    history_seed = "INSERT INTO {} (version) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM {})"
    history_dml = _HISTORY_DML
    file_pattern = NUMBERED
    down_mark = r".*---- create above / drop below ----"

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        return tern_up(text)

    def advisory_locks(self, place: LockPlace) -> tuple[int, ...]:
        """tern's ``Migrator`` holds ``pg_advisory_lock(9628173550095224)`` (one key for
        every database) while it migrates."""
        return (TERN_LOCK,)

    def check_order(self, files: list[MigrationFile]) -> None:
        for number, found in enumerate(files, start=1):
            if found.version != number:
                raise LayoutError(f"{found.path}:1: tern numbers migrations 1, 2, 3... without "
                                  f"gaps, and {number} is missing before {found.version} (tern "
                                  f"refuses this folder too); renumber the files")

    def claims_file(self, entry: Entry, head: Callable[[], str]) -> bool:
        if not (entry.is_file and NUMBERED.match(entry.name)):
            return False
        text = head()
        return SPLIT in text or NO_TX.search(text) is not None

    def read_history(self, rows: Sequence[dict[str, Any]],
                     migrations: Sequence[Versioned]) -> dict[str, Row]:
        by_tag: dict[str, Row] = {}
        for r in rows[-1:]:  # one row: the current version; it and all below are applied
            current = int(r["version"])
            by_tag = {m.tag: Row(m.tag) for m in migrations if m.version <= current}
            if current > 0:  # named even when no file has it (a folder behind the database)
                by_tag.setdefault(str(current), Row(str(current)))
        return by_tag


TOOL = Tern()
