"""Where migrations come from: a folder of SQL files, checked whole before anything runs.

A file is ``<version>_<name>.sql``; versions are whole numbers, unique, applied in order.
Its header (the comment lines before the first statement) may carry directives::

    -- pgsteady: no-transaction

``no-transaction`` is for statements PostgreSQL refuses to run in a transaction
(``CREATE INDEX CONCURRENTLY`` and friends); such a file holds exactly one statement, so a
failure can never leave half of it applied. Every problem is reported as ``file:line: what is
wrong; how to fix it`` before a single statement is sent.

Alembic projects get the same safety from :mod:`pgsteady.migrate.alembic`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pgsteady.errors import BadMigration
from pgsteady.migrate.analysis import SqlSyntaxError, StatementInfo, analyze

log = logging.getLogger("pgsteady.migrate")

FILENAME = re.compile(r"^(?P<version>\d+)_(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)\.sql$")
DIRECTIVE = re.compile(r"^\s*--\s*pgsteady\s*:\s*(?P<value>.*?)\s*$", re.IGNORECASE)
DIRECTIVES = frozenset({"no-transaction"})
NO_TRANSACTION = "no-transaction"


@dataclass(frozen=True)
class Migration:
    """One migration file, parsed and checked."""

    version: int
    name: str
    path: Path
    sql: str
    transactional: bool
    statements: tuple[StatementInfo, ...] = field(repr=False)

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()

    @property
    def label(self) -> str:
        return self.path.name

    def where(self, statement: StatementInfo) -> str:
        return f"{self.path}:{statement.line}"


def load_dir(directory: str | Path) -> list[Migration]:
    """Every migration in ``directory``, in version order; BadMigration on the first problem."""
    folder = Path(directory)
    if not folder.is_dir():
        raise BadMigration(f"{folder}: no such directory; pass the folder of migration files "
                           f"with --dir")
    migrations: list[Migration] = []
    seen: dict[int, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.suffix != ".sql" or not path.is_file():
            continue
        match = FILENAME.match(path.name)
        if match is None:
            raise BadMigration(f"{path}:1: the name must be <version>_<name>.sql with a whole "
                               f"number version, like 0001_create_orgs.sql; rename the file")
        version = int(match["version"])
        if version in seen:
            raise BadMigration(f"{path}:1: version {version} is also used by {seen[version]}; "
                               f"give each migration its own version")
        seen[version] = path
        migrations.append(load_file(path, version, match["name"]))
    return sorted(migrations, key=lambda m: m.version)


def load_file(path: Path, version: int, name: str) -> Migration:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadMigration(f"{path}:1: cannot read it as UTF-8 text ({exc}); fix the file") \
            from None
    directives = _directives(path, text)
    try:
        statements = analyze(text)
    except SqlSyntaxError as exc:
        raise BadMigration(f"{path}:{exc.line}: {exc.message} (column {exc.col}); "
                           f"fix the SQL") from None
    if not statements:
        raise BadMigration(f"{path}:1: contains no SQL statement; add one or delete the file")
    transactional = NO_TRANSACTION not in directives
    _check_statements(path, statements, transactional)
    return Migration(version, name, path, text, transactional, tuple(statements))


def _directives(path: Path, text: str) -> set[str]:
    """Directives from the header; an unknown or misplaced one is an error."""
    found: set[str] = set()
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
            raise BadMigration(f"{path}:{number}: unknown directive {match['value']!r}; "
                               f"known: {known}")
        if not in_header:
            raise BadMigration(f"{path}:{number}: directive {value!r} must be in the header, "
                               f"before the first statement; move it to the top")
        found.add(value)
    return found


def _check_statements(path: Path, statements: Iterable[StatementInfo],
                      transactional: bool) -> None:
    statements = list(statements)
    for statement in statements:
        if statement.kind.startswith("TRANSACTION"):
            raise BadMigration(
                f"{path}:{statement.line}: {statement.kind.split()[-1]} is not allowed; "
                f"pgsteady runs each migration in its own transaction, remove it")
        if transactional and not statement.transactional:
            raise BadMigration(
                f"{path}:{statement.line}: {statement.kind} cannot run inside a transaction; "
                f"put it alone in a file whose first line is '-- pgsteady: {NO_TRANSACTION}'")
        if statement.kind == "CREATE INDEX CONCURRENTLY" and not statement.node.idxname:
            raise BadMigration(
                f"{path}:{statement.line}: CREATE INDEX CONCURRENTLY needs an index name, so "
                f"an invalid index left by a failed try can be found and dropped; name it")
    if not transactional and len(statements) != 1:
        raise BadMigration(
            f"{path}:{statements[1].line if len(statements) > 1 else 1}: a "
            f"'{NO_TRANSACTION}' migration must hold exactly one statement, so a failure cannot "
            f"leave part of it applied; split it into one file per statement")
