"""dbmate: ``<version><anything>.sql`` (as dbmate reads names: the leading digits are the
version, ``1_a.sql``, ``00000000000000-initial-schema.sql``) with ``-- migrate:up`` /
``-- migrate:down``; one transaction unless the up line says ``transaction:false``. History
in ``schema_migrations`` (one column: the version as the file writes it)."""

from __future__ import annotations

import re
from pathlib import Path

from pgsteady.tools._base import FlatTool, LayoutError, UpPart, lines_between

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import LiteralString

    from pgsteady.tools._base import Entry, LockPlace

# dbmate's migrationFileRegexp: the leading digits are the version, the rest (after a
# separator) is only the name.
_NAMED = re.compile(r"^(?P<version>\d+)[-_.]*(?P<name>.*)\.sql$")
_MARK = re.compile(r"^--\s*migrate:(?P<what>up|down)\b(?P<options>.*)$", re.IGNORECASE)


def dbmate_up(path: Path, text: str) -> tuple[UpPart, bool]:
    """dbmate: the lines after ``-- migrate:up`` up to ``-- migrate:down``."""
    up_line: int | None = None
    down_line: int | None = None
    transactional = True
    for number, line in enumerate(text.splitlines(), start=1):
        match = _MARK.match(line.strip())
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
    return UpPart(lines_between(text, up_line + 1, down_line), up_line + 1), transactional


# The history statements (action -> statement; {} is the qualified table name, values are
# parameters).
_HISTORY_DML: dict[str, LiteralString] = {
    "record": "INSERT INTO {} (version) VALUES (%(tag)s) ON CONFLICT DO NOTHING",
    "forget": "DELETE FROM {} WHERE version = %(tag)s",
}


class Dbmate(FlatTool):
    name = "dbmate"
    display = "dbmate"
    alone_hint = "put it in its own file whose up line says '-- migrate:up transaction:false'"
    history_table = "schema_migrations"
    history_order = "version"
    history_columns = frozenset({"version"})
    history_ddl = "CREATE TABLE IF NOT EXISTS {} (version varchar(128) PRIMARY KEY)"
    history_dml = _HISTORY_DML
    file_pattern = _NAMED
    down_mark = r"--\s*migrate:down"

    def advisory_locks(self, place: LockPlace) -> tuple[int, ...]:
        """dbmate takes no lock of its own (two dbmate runs can overlap): nothing to add to
        pgsteady's runner lock."""
        return ()

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        return dbmate_up(path, text)

    def tag_of(self, digits: str, version: int) -> str:
        return digits  # dbmate keeps the version as the file writes it (leading zeros too)

    def claims_file(self, entry: Entry, head: Callable[[], str]) -> bool:
        return entry.is_file and _NAMED.match(entry.name) is not None and re.search(
            r"^\s*--\s*migrate:up\b", head(), re.IGNORECASE | re.MULTILINE) is not None


TOOL = Dbmate()
