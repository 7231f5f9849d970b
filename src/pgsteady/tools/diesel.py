"""Diesel: ``<version>_<name>/up.sql`` (``down.sql`` beside it is not applied), the version
being the part before the first ``_`` without its dashes (``2024-01-31-120000`` is
``20240131120000``), ordered as Diesel orders them (as text). One transaction per migration
unless its ``metadata.toml`` says ``run_in_transaction = false``; Diesel then sends ``up.sql``
as one multi-statement query, transactional as Prisma's. Hasura and other tools that keep
``<version>_<name>/up.sql`` folders read the same. History in
``__diesel_schema_migrations``."""

from __future__ import annotations

import re
from pathlib import Path

from pgsteady.tools._base import FolderTool, LayoutError, MigrationFile, UpPart, check_version

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import LiteralString

    from pgsteady.tools._base import Entry, LockPlace

VERSION_FOLDER = re.compile(r"\d[\d-]*_")  # <version>_<name>/ around up.sql


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


# The history statements (action -> statement; {} is the qualified table name, values are
# parameters).
_HISTORY_DML: dict[str, LiteralString] = {
    "record": "INSERT INTO {} (version) VALUES (%(tag)s) ON CONFLICT DO NOTHING",
    "forget": "DELETE FROM {} WHERE version = %(tag)s",
}


class Diesel(FolderTool):
    name = "diesel"
    display = "Diesel"
    script_name = "up.sql"
    folder_pattern = re.compile(r"^(?P<version>\d[\d-]*)_(?P<name>.+)$")
    alone_hint = ("Diesel runs it outside a transaction only when it is alone in up.sql and "
                  "metadata.toml says run_in_transaction = false; give it a migration of its "
                  "own")
    history_table = "__diesel_schema_migrations"
    history_order = "version"
    history_columns = frozenset({"version", "run_on"})
    history_ddl = ("CREATE TABLE IF NOT EXISTS {} (version varchar(50) PRIMARY KEY NOT NULL, "
                   "run_on timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP)")
    history_dml = _HISTORY_DML

    def advisory_locks(self, place: LockPlace) -> tuple[int, ...]:
        """Diesel's CLI and ``embed_migrations!`` take no advisory lock (two runs can overlap):
        nothing to add to pgsteady's runner lock."""
        return ()

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        return UpPart(text), diesel_transactional(path)

    def migration(self, script: Path, match: re.Match[str], text: str,
                  seen: dict[str, Path]) -> MigrationFile:
        tag = match["version"].replace("-", "")
        if tag in seen:
            raise LayoutError(f"{script}:1: version {tag} is also used by {seen[tag]}; give "
                              f"each migration its own version")
        seen[tag] = script
        # Diesel orders versions as text: digit by digit, so 10 comes before 9.
        return MigrationFile(self.name, check_version(script, tag), tag,
                             tuple(int(d) for d in tag), match["name"], script, UpPart(text),
                             diesel_transactional(script), text)

    def claims_dir(self, entry: Entry) -> bool:
        return (entry.path / "up.sql").is_file()

    def label(self, path: Path, tag: str) -> str:
        return path.parent.name

    def has_version(self, text: str, tag: str, version: int, order: tuple[int, ...]) -> bool:
        return text.replace("-", "") in (tag, str(version))


TOOL = Diesel()
