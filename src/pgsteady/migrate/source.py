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
from dataclasses import dataclass, field, replace
from pathlib import Path

from pglast.parser import ParseError, fingerprint

from pgsteady import sqltext
from pgsteady.errors import BadMigration
from pgsteady.migrate import layouts
from pgsteady.migrate.analysis import SqlSyntaxError, StatementInfo, analyze

log = logging.getLogger("pgsteady.migrate")

DIRECTIVE = re.compile(r"^\s*--\s*pgsteady\s*:\s*(?P<value>.*?)\s*$", re.IGNORECASE)
DIRECTIVES = frozenset({"no-transaction"})
NO_TRANSACTION = "no-transaction"
_TOOL_NAMES = {"prisma": "Prisma", "golang-migrate": "golang-migrate"}


@dataclass(frozen=True)
class Migration:
    """One migration file, parsed and checked.

    ``version`` orders it; ``tag`` is the version as its tool writes it in its history table
    (``20240101120000_init`` for Prisma, ``1.2`` for Flyway); ``sql`` is its Up part.
    """

    version: int
    name: str
    path: Path
    sql: str
    transactional: bool
    statements: tuple[StatementInfo, ...] = field(repr=False)
    checksum: str = field(default="", repr=False)
    tag: str = ""
    layout: str = "pgsteady"
    order: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.checksum:
            object.__setattr__(self, "checksum", hashlib.sha256(self.sql.encode()).hexdigest())
        if not self.tag:
            object.__setattr__(self, "tag", str(self.version))
        if not self.order:
            object.__setattr__(self, "order", (self.version,))

    @property
    def label(self) -> str:
        return self.path.name if self.layout != "prisma" else self.tag

    def where(self, statement: StatementInfo) -> str:
        return f"{self.path}:{statement.line}"


_SKIPS_NAMED = 10  # a wrong --dir names a few strays, not every file in it


def scan_dir(directory: str | Path, layout: str = "auto") -> layouts.Scan:
    """The folder's files as ``layout`` (``auto``: detected), skipped entries logged."""
    try:
        name = layouts.detect(directory) if layout == "auto" else layout
        found = layouts.scan(directory, name)
    except layouts.LayoutError as exc:
        raise BadMigration(str(exc)) from None
    said = [skipped for skipped in found.skipped if skipped.said]
    for skipped in found.skipped:
        if not skipped.said:
            log.debug("skipped %s: %s", skipped.path, skipped.reason)
    for skipped in said[:_SKIPS_NAMED]:
        log.warning("skipped %s: %s", skipped.path, skipped.reason)
    if len(said) > _SKIPS_NAMED:
        log.warning("skipped %d more entries in %s that are not migrations (is --dir the "
                    "migrations folder?)", len(said) - _SKIPS_NAMED, directory)
    return found


def load_dir(directory: str | Path, layout: str = "auto") -> list[Migration]:
    """Every migration in ``directory``, in version order; BadMigration on the first problem.

    ``layout`` is one of :data:`~pgsteady.migrate.layouts.NAMES`, or ``auto``.
    """
    return [load(file) for file in scan_dir(directory, layout).files]


def load_file(path: Path, version: int, name: str) -> Migration:
    """One pgsteady-layout file."""
    try:
        text = layouts.read(path)
    except layouts.LayoutError as exc:
        raise BadMigration(str(exc)) from None
    return load(layouts.MigrationFile("pgsteady", version, str(version), (version,), name, path,
                                      layouts.UpPart(text), True, text))


def load(file: layouts.MigrationFile) -> Migration:
    """Parse and check one file of any layout; its statements keep file lines."""
    path, text = file.path, file.text
    statements = statements_of(path, file.up)
    if file.layout == "pgsteady":
        transactional = NO_TRANSACTION not in _directives(path, text)
    elif file.transactional is None:
        statements = _unwrap(statements)
        transactional = not (len(statements) == 1 and not statements[0].transactional)
    else:
        transactional = file.transactional
    if not statements:
        raise BadMigration(f"{path}:{file.up.first_line}: contains no SQL statement; add one "
                           f"or delete the file")
    _check_statements(path, statements, transactional, file.layout)
    checksum = hashlib.sha256(text.encode()).hexdigest()
    if file.layout == "flyway":
        checksum = str(layouts.flyway_checksum(text))
    return Migration(file.version, file.name, path, file.up.text, transactional,
                     tuple(statements), checksum, file.tag, file.layout, file.order)


def statements_of(path: Path, up: layouts.UpPart) -> list[StatementInfo]:
    """The statements of an Up part, in one linear pass: each is cut out by the scanner and
    parsed alone, so time is linear in the file and memory bounded by its largest statement.
    Lines are the file's; parse trees are kept only where ``apply`` needs them.

    Statements that differ only in constants (a bulk of INSERTs) have one fingerprint, parsed
    by PostgreSQL's own parser in C: such a statement is analysed once, the rest reuse it.
    """
    out: list[StatementInfo] = []
    seen: dict[str, StatementInfo] = {}
    for chunk in sqltext.split(up.text):
        key = _fingerprint(chunk.text)
        template = seen.get(key) if key is not None else None
        if template is not None:
            lead = sqltext.skip_blanks(chunk.text)
            newlines = chunk.text.count("\n", 0, lead)
            col = lead - (chunk.text.rfind("\n", 0, lead) + 1) + 1
            out.append(replace(
                template, sql=chunk.text[lead:].strip(),
                line=up.file_line(chunk.line + newlines),
                col=col + (chunk.col - 1 if not newlines else 0)))
            continue
        try:
            found = analyze(chunk.text)
        except SqlSyntaxError as exc:
            line = up.file_line(chunk.line + exc.line - 1)
            col = exc.col + (chunk.col - 1 if exc.line == 1 else 0)
            raise BadMigration(f"{path}:{line}: {exc.message} (column {col}); "
                               f"fix the SQL") from None
        for info in found:
            keep = info.kind == "CREATE INDEX CONCURRENTLY"
            out.append(replace(
                info, line=up.file_line(chunk.line + info.line - 1),
                col=info.col + (chunk.col - 1 if info.line == 1 else 0),
                node=info.node if keep else None))
        if key is not None and len(found) == 1 and not keep:
            seen[key] = replace(found[0], node=None)
    return out


def _fingerprint(text: str) -> str | None:
    try:
        return str(fingerprint(text))
    except ParseError:
        return None  # analyze() reports it, with its position


def _unwrap(statements: list[StatementInfo]) -> list[StatementInfo]:
    """Prisma and golang-migrate files often wrap themselves in BEGIN; ... COMMIT;: pgsteady
    runs each in a transaction anyway, so the pair is dropped (anything else is refused)."""
    if len(statements) >= 2 and statements[0].kind in ("TRANSACTION BEGIN", "TRANSACTION START") \
            and statements[-1].kind in ("TRANSACTION COMMIT",):
        return statements[1:-1]
    return statements


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
                      transactional: bool, layout: str = "pgsteady") -> None:
    statements = list(statements)
    for statement in statements:
        if statement.kind.startswith("TRANSACTION"):
            raise BadMigration(
                f"{path}:{statement.line}: {statement.kind.split()[-1]} is not allowed; "
                f"pgsteady runs each migration in its own transaction, remove it")
        if transactional and not statement.transactional and layout != "pgsteady":
            raise BadMigration(
                f"{path}:{statement.line}: {statement.kind} cannot run inside a transaction; "
                f"{_alone_hint(layout)}")
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


def _alone_hint(layout: str) -> str:
    if layout == "goose":
        return "put it in its own file with '-- +goose NO TRANSACTION'"
    if layout == "dbmate":
        return "put it in its own file whose up line says '-- migrate:up transaction:false'"
    if layout == "flyway":
        return "put it in its own script with executeInTransaction=false in <script>.conf"
    return f"{_TOOL_NAMES.get(layout, layout)} runs it outside a transaction only when it " \
           f"is alone in its file; move it to a migration of its own"
