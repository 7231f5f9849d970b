"""golang-migrate: ``<version>_<name>.up.sql`` (``.down.sql`` ignored); the file is sent as one
multi-statement query, which PostgreSQL runs as one implicit transaction, so a file holding one
statement that cannot run in a transaction runs alone. History in ``schema_migrations``: one
row, the current version and whether it is ``dirty`` (started, never finished).

Lint also reads the names other tools give such folders: ``.nontx.`` runs outside a
transaction, popx's ``.<dialect>.`` files for other databases are skipped, and a version's
``.postgres.`` file runs in place of its generic one."""

from __future__ import annotations

import re
from pathlib import Path

from pgsteady.tools._base import FlatTool, LockPlace, Row, go_advisory_lock_id

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, LiteralString

    from pgsteady.tools._base import Entry, Listing, Versioned

UP = re.compile(r"^(?P<version>\d+)_(?P<name>.+)\.up\.sql$")
DOWN = re.compile(r"^\d+_.+\.down\.sql$")
# Lint's wider reading: names with .nontx. and popx's dialects
NONTX = re.compile(r"\.(autocommit|nontx)\.")
_LINT_UP = re.compile(r"^(?P<version>\d+)_.+\.up(\.nontx)?\.sql$")
_LINT_DOWN = re.compile(r"^\d+_.+\.down(\.nontx)?\.sql$")
UP_DOWN = re.compile(r"\.(up|down)(\.nontx)?\.sql$")
OTHER_DIALECT = re.compile(r"\.(mysql|sqlite3?|cockroach)(\.autocommit)?\.(up|down)")


# coder runs golang-migrate through its own driver (coderd/database/migrations/
# txnmigrator.go), which replaces golang-migrate's lock with pg_advisory_xact_lock of this
# key, held for the whole run (every migration in one transaction). A session lock on the
# same key conflicts with it, so taking it too keeps coder's servers and pgsteady apart.
CODER_LOCK = 1037453835920848937

# The history statements (action -> statement; {} is the qualified table name, values are
# parameters).
_HISTORY_DML: dict[str, LiteralString] = {
    "record": "INSERT INTO {} (version, dirty) VALUES (%(version)s, NOT %(finished)s)",
    "clear": "TRUNCATE {}",
}


class GolangMigrate(FlatTool):
    name = "golang-migrate"
    display = "golang-migrate"
    numeric = True
    history_table = "schema_migrations"
    history_order = "version"
    history_columns = frozenset({"version", "dirty"})
    history_ddl = ("CREATE TABLE IF NOT EXISTS {} (version bigint NOT NULL PRIMARY KEY, "
                   "dirty boolean NOT NULL)")
    history_dml = _HISTORY_DML
    # one row, the current version: a start or a record replaces it
    start_actions = ("clear", "record")
    record_actions = ("clear", "record")
    file_pattern = UP
    guess_note = ("guessed from <version>_<name>.up.sql names, which pop's, sqlx's and other "
                  "tools' folders share: pass --tool if the folder is theirs")
    file_hint = "<version>_<name>.up.sql"
    quiet_pattern = DOWN

    def lint_files(self, listing: Listing, down: Callable[[Path], None],
                   other: Callable[[Path, str], None]) -> list[Path] | None:
        return lint_files(listing.entries, down, other)

    def advisory_locks(self, place: LockPlace) -> tuple[int, ...]:
        """golang-migrate (v4.15+) holds ``pg_advisory_lock`` of a key made from the schema,
        the table and the database name: the CLI names the database by its URL path
        (``/app``), the library (``WithInstance``) by ``current_database()`` (``app``). Both,
        for each schema the table may be configured in; and coder's (:data:`CODER_LOCK`)."""
        return (*(go_advisory_lock_id(schema, place.table, database)
                  for schema in place.schemas
                  for database in (f"/{place.database}", place.database)), CODER_LOCK)

    def claims_file(self, entry: Entry, head: Callable[[], str]) -> bool:
        return UP.match(entry.name) is not None or DOWN.match(entry.name) is not None

    def read_history(self, rows: Sequence[dict[str, Any]],
                     migrations: Sequence[Versioned]) -> dict[str, Row]:
        by_tag: dict[str, Row] = {}
        for r in rows[-1:]:  # one row: the current version; everything below is applied
            current = int(r["version"])
            for m in migrations:
                if m.version < current:
                    by_tag[m.tag] = Row(m.tag)
            by_tag[str(current)] = Row(str(current), finished=not r["dirty"])
        return by_tag


def lint_names_fit(names: Sequence[str]) -> bool:
    """Whether ``.sql`` names (all up/down ones) show golang-migrate's wider family
    (``.nontx.``, another database's file): lint reads the folder as golang-migrate's."""
    return any(NONTX.search(n) or OTHER_DIALECT.search(n) for n in names)


def lint_files(entries: Sequence[Entry], down: Callable[[Path], None],
               other: Callable[[Path, str], None]) -> list[Path]:
    """The up files lint judges, in golang-migrate's order: by name, not :meth:`scan` (popx's
    20-digit versions are fine for linting); down scripts go to ``down``, the rest it does
    not run to ``other`` with the reason."""
    ups = []
    for entry in entries:
        if not (entry.is_file and entry.name.endswith(".sql")):
            continue
        if _LINT_DOWN.match(entry.name):
            down(entry.path)
        elif not _LINT_UP.match(entry.name):
            other(entry.path, "golang-migrate runs only <version>_<name>.up.sql")
        elif OTHER_DIALECT.search(entry.name):
            other(entry.path, "another database's file (popx's <dialect> name)")
        else:
            ups.append(entry.path)
    specific = {p.name.partition("_")[0]: p for p in ups if ".postgres." in p.name}
    for path in ups:
        version = path.name.partition("_")[0]
        if ".postgres." not in path.name and version in specific:
            other(path, f"{specific[version].name} runs instead (this version's "
                        "PostgreSQL file)")
    ups = [p for p in ups if ".postgres." in p.name
           or p.name.partition("_")[0] not in specific]
    return sorted(ups, key=lambda p: (int(p.name.partition("_")[0]), p.name))


TOOL = GolangMigrate()
