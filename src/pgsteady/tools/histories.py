"""Every migration runner's history table pgsteady can recognise in a database: those of the
tools in the registry (each declares its table and columns) and, in :data:`FOREIGN`, those of
runners pgsteady does not run. A database whose history another runner keeps must not get its
migrations run again by pgsteady (a Mattermost database's ``db_migrations`` beside a folder
of ``*.up.sql`` files read as golang-migrate's): ``pgsteady migrate`` looks first, and
refuses, naming the table and the ``--tool`` that reads it.

A table is told by its name and its columns (golang-migrate's and dbmate's
``schema_migrations`` differ by column, Rails' by the ``ar_internal_metadata`` beside it);
the most specific signature that fits wins.
"""

from __future__ import annotations

from pgsteady._record import Record

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Final


class Signature(Record):
    """A runner's history table: its ``table`` name, the ``columns`` it has, a ``companion``
    table the runner keeps beside it (or None); ``runner`` as people write it, ``tool``: the
    ``--tool`` that reads it (None: pgsteady does not run that runner's folders)."""

    __slots__ = ("columns", "companion", "prefixed", "runner", "table", "tool")

    def __init__(self, runner: str, table: str, columns: Iterable[str],
                 tool: str | None = None, companion: str | None = None, *,
                 prefixed: bool = False) -> None:
        self.runner: Final = runner
        self.table: Final = table
        self.columns: Final = frozenset(columns)
        self.tool: Final = tool
        self.companion: Final = companion
        # The runner lets a project put a prefix before the name (morph's
        # SetMigrationTableName: Mattermost's plugins keep "ir_db_migrations").
        self.prefixed: Final = prefixed

    def fits(self, table: str, columns: frozenset[str], tables: frozenset[str]) -> bool:
        named = table == self.table or (self.prefixed and table.endswith("_" + self.table))
        return (named and self.columns <= columns
                and (self.companion is None or self.companion in tables))

    @property
    def weight(self) -> int:
        return len(self.columns) + (self.companion is not None)


#: Runners pgsteady does not run, by their default history table (columns as each creates
#: them in PostgreSQL, lower-case).
FOREIGN = (
    Signature("Rails (ActiveRecord)", "schema_migrations", ["version"],
              companion="ar_internal_metadata"),
    Signature("Ecto", "schema_migrations", ["version", "inserted_at"]),
    Signature("pop (gobuffalo) / popx", "schema_migration", ["version"]),
    Signature("Django", "django_migrations", ["id", "app", "name", "applied"]),
    Signature("Knex", "knex_migrations", ["id", "name", "batch", "migration_time"]),
    Signature("TypeORM", "migrations", ["id", "timestamp", "name"]),
    Signature("Laravel", "migrations", ["id", "migration", "batch"]),
    Signature("Sequelize", "SequelizeMeta", ["name"]),
    Signature("morph (Mattermost)", "db_migrations", ["version", "name"], prefixed=True),
    Signature("node-pg-migrate", "pgmigrations", ["id", "name", "run_on"]),
    Signature("MikroORM", "mikro_orm_migrations", ["id", "name", "executed_at"]),
    Signature("Kysely", "kysely_migration", ["name", "timestamp"]),
    Signature("Liquibase", "databasechangelog", ["id", "author", "filename", "dateexecuted",
                                                 "orderexecuted"]),
    Signature("refinery", "refinery_schema_history", ["version", "name", "applied_on",
                                                      "checksum"]),
    Signature("Phinx", "phinxlog", ["version", "migration_name", "start_time"]),
    Signature("Doctrine", "doctrine_migration_versions", ["version", "executed_at"]),
    Signature("yoyo", "_yoyo_migration", ["migration_hash", "migration_id"]),
    Signature("Atlas", "atlas_schema_revisions", ["version", "description", "type",
                                                   "applied", "total"]),
)


def signatures() -> list[Signature]:
    """Every signature: the registry's tools' (their own history tables), then FOREIGN."""
    from pgsteady.tools import registry  # noqa: PLC0415 -- the registry lists the tools

    known = [registry.get(name) for name in registry.HISTORIES]
    return [*(Signature(tool.display, str(tool.history_table), tool.history_columns,
                        tool.name if tool.migrates else None)
              for tool in known if tool.history_table), *FOREIGN]


def table_names() -> list[str]:
    """The history table names to look for."""
    return sorted({s.table for s in signatures()} | {s.companion for s in signatures()
                                                     if s.companion})


def table_patterns() -> list[str]:
    """LIKE patterns for the names a runner lets a project prefix (``%db_migrations``); what
    they find is then checked by :meth:`Signature.fits`."""
    return sorted({f"%{s.table}" for s in signatures() if s.prefixed})


def identify(table: str, columns: Iterable[str], tables: Iterable[str] = (),
             ) -> Signature | None:
    """The runner whose history ``table`` (with ``columns``, beside ``tables`` in its
    schema) is, the most specific fit; None when it is no runner's pgsteady knows."""
    have, beside = frozenset(columns), frozenset(tables)
    fits = [s for s in signatures() if s.fits(table, have, beside)]
    return max(fits, key=lambda s: s.weight, default=None)
