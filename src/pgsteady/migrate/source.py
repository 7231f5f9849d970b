"""Where migrations come from: a folder of SQL files, checked whole before anything runs.

A file is ``<version>_<name>.sql``; versions are whole numbers, unique, applied in order.
Its header (the comment lines before the first statement) may carry directives::

    -- pgsteady: no-transaction

``no-transaction`` is for statements PostgreSQL refuses to run in a transaction
(``CREATE INDEX CONCURRENTLY`` and friends); such a file holds exactly one statement, so a
failure can never leave half of it applied. sqlx's ``-- no-transaction`` as a file's first
line means the same, so a sqlx folder (named ``<version>_<name>.sql`` too) runs as it is.
Every problem is reported as ``file:line: what is wrong; how to fix it`` before a single
statement is sent.

Alembic projects get the same safety from :mod:`pgsteady.migrate.alembic`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pgsteady.errors import BadMigration
from pgsteady.sql import classify
from pgsteady.sql import text as sqltext
from pgsteady.sql.classify import ParseError, fingerprint
from pgsteady.tools import pgsteady as pgsteady_tool
from pgsteady.tools import registry

if TYPE_CHECKING:
    from pgsteady.sql.analysis import StatementInfo

log = logging.getLogger("pgsteady.migrate")

NO_TRANSACTION = pgsteady_tool.NO_TRANSACTION


@dataclass(frozen=True)
class Part:
    """One statement of a file: its text and place, and its analysis when loading needed it
    (a statement of a kind that always runs in a transaction is analysed when asked)."""

    sql: str
    line: int
    col: int
    info: StatementInfo | None = None


@dataclass(frozen=True)
class Migration:
    """One migration file, parsed and checked.

    ``version`` orders it; ``tag`` is the version as its tool writes it in its history table
    (``20240101120000_init`` for Prisma, ``1.2`` for Flyway); ``sql`` is its Up part;
    ``parts`` its statements as text, ``statements`` the same analysed (on first use).
    """

    version: int
    name: str
    path: Path
    sql: str
    transactional: bool
    parts: tuple[Part, ...] = field(repr=False)
    checksum: str = field(default="", repr=False)
    tag: str = ""
    tool: str = "pgsteady"
    order: tuple[int, ...] = ()
    #: Why pgsteady cannot run it (a goose Go migration): migrate stops before it.
    elsewhere: str | None = None
    #: No version; runs again when its checksum changes, after the versioned ones (R__).
    repeatable: bool = False

    def __post_init__(self) -> None:
        if not self.checksum:
            object.__setattr__(self, "checksum", hashlib.sha256(self.sql.encode()).hexdigest())
        if not self.tag:
            object.__setattr__(self, "tag", str(self.version))
        if not self.order:
            object.__setattr__(self, "order", (self.version,))

    @cached_property
    def statements(self) -> tuple[StatementInfo, ...]:
        """Every statement with what it locks (analysed now if loading did not need to)."""
        return tuple(part.info if part.info is not None else _analysed(part)
                     for part in self.parts)

    @property
    def label(self) -> str:
        return registry.get(self.tool).label(self.path, self.tag)

    def where(self, statement: StatementInfo) -> str:
        return f"{self.path}:{statement.line}"

    def has_version(self, text: str) -> bool:
        """Whether ``text`` (``--accept``, ``--baseline``, a history row) is this migration's
        version as its tool reads it: its tag or number; for Flyway, any text Flyway compares
        as equal (``001``, ``1.0`` and ``1`` are one version)."""
        return registry.get(self.tool).has_version(text, self.tag, self.version, self.order)


_SKIPS_NAMED = 10  # a wrong --dir names a few strays, not every file in it



# A Go template's action ({{ .Options "Namespace" }}, {{ index .Env "X" }}): pop's SQL
# migrations are such templates, rendered before they run.
_TEMPLATE = re.compile(r"\{\{-?\s*[.\w\"(].*?\}\}", re.DOTALL)

def scan_dir(directory: str | Path, tool: str = "auto") -> registry.Scan:
    """The folder's files as ``tool``'s (``auto``: detected), skipped entries logged."""
    try:
        listing = registry.Listing.of(directory)  # listed and read once for both
        name = registry.detect(directory, listing) if tool == "auto" else tool
        found = registry.scan(directory, name, listing)
    except registry.LayoutError as exc:
        raise BadMigration(str(exc) + _fits_hint(directory, tool)) from None
    said = [skipped for skipped in found.skipped if skipped.said]
    if tool != "auto" and said and not found.files:
        raise BadMigration(_no_file_of(directory, tool, said))
    for skipped in found.skipped:
        if not skipped.said:
            log.debug("skipped %s: %s", skipped.path, skipped.reason)
    for skipped in said[:_SKIPS_NAMED]:
        log.warning("skipped %s: %s", skipped.path, skipped.reason)
    if len(said) > _SKIPS_NAMED:
        log.warning("skipped %d more entries in %s that are not migrations (is --dir the "
                    "migrations folder?)", len(said) - _SKIPS_NAMED, directory)
    return found


def _fits(directory: str | Path, tool: str) -> str | None:
    """The tool the folder reads as, when detection names one other than ``tool``."""
    try:
        fits = registry.detect(directory)
    except (registry.LayoutError, OSError):
        return None
    return fits if fits not in (registry.DEFAULT, tool) else None


def _fits_hint(directory: str | Path, tool: str) -> str:
    """`` (the folder reads as flyway: ...)`` after a --tool's refusal of a file."""
    fits = _fits(directory, tool) if tool != "auto" else None
    return (f" (the folder reads as {fits}: pass --tool {fits} or leave --tool out)"
            if fits else "")


def _no_file_of(directory: str | Path, tool: str, said: list[registry.Skipped]) -> str:
    """One line for a --tool that fits none of the folder's files, naming the one that
    does when detection finds it."""
    fits = _fits(directory, tool)
    first = said[0]
    hint = (f"the folder reads as {fits}: pass --tool {fits} or leave --tool out"
            if fits else "is --dir the migrations folder, and --tool its tool?")
    return (f"{directory}: no file is a {tool} migration ({len(said)} skipped; "
            f"{first.path.name}: {first.reason}); {hint}")


def load_dir(directory: str | Path, tool: str = "auto") -> list[Migration]:
    """Every migration in ``directory``, in version order; BadMigration on the first problem.

    ``tool`` is one of :data:`~pgsteady.tools.registry.NAMES`, or ``auto``.
    """
    return [load(file) for file in scan_dir(directory, tool).files]


def load(file: registry.MigrationFile) -> Migration:
    """Parse and check one file of any tool; its statements keep file lines."""
    path, text = file.path, file.text
    tool = registry.get(file.tool)
    if file.elsewhere is not None:
        return Migration(file.version, file.name, path, "", True, (), "-", file.tag,
                         file.tool, file.order, file.elsewhere)
    statements = parts_of(path, file.up)
    if tool.unwraps and file.transactional is not False:
        statements = _unwrap(statements)  # the tool's transaction swallows the file's own
    # a mix Flyway refuses by default runs as with mixed=true: statement by statement
    transactional = tool.in_transaction(file.transactional, [
        part.info is not None and not part.info.transactional for part in statements]) is True
    if not statements:
        if not tool.allows_empty:
            raise BadMigration(f"{path}:{file.up.first_line}: contains no SQL statement; add "
                               f"one or delete the file")
        transactional = True  # other tools record an empty migration: so does pgsteady
    _check_statements(path, statements, transactional, file.tool)
    checksum = tool.checksum(text, path) or hashlib.sha256(text.encode()).hexdigest()
    return Migration(file.version, file.name, path, file.up.text, transactional,
                     tuple(statements), checksum, file.tag, file.tool, file.order,
                     repeatable=file.repeatable)


def statements_of(path: Path, up: registry.UpPart) -> list[StatementInfo]:
    """The statements of an Up part, analysed (:func:`parts_of`, then each one's analysis)."""
    return [part.info if part.info is not None else _analysed(part)
            for part in parts_of(path, up)]


def parts_of(path: Path, up: registry.UpPart) -> list[Part]:
    """The statements of an Up part, in one linear pass: each is cut out by the scanner and
    parsed alone, so time is linear in the file and memory bounded by its largest statement.
    Lines are the file's; parse trees are kept only where ``apply`` needs them.

    Plain statements (:mod:`~pgsteady.sql.classify`) are analysed only when asked.
    Statements that differ only in constants (a bulk of INSERTs) have one fingerprint, parsed
    by PostgreSQL's own parser in C: such a statement is classified (and, if not plain,
    analysed) once, the rest reuse that.
    """
    out: list[Part] = []
    seen: dict[str, StatementInfo] = {}
    plain_shapes: set[str] = set()  # fingerprints of lone plain statements
    for chunk in sqltext.split(up.text):
        key = _fingerprint(chunk.text)
        if key is not None and (key in plain_shapes or key in seen):
            lead = sqltext.skip_blanks(chunk.text)
            newlines = chunk.text.count("\n", 0, lead)
            line = up.file_line(chunk.line + newlines)
            col = lead - (chunk.text.rfind("\n", 0, lead) + 1) + 1 + \
                (chunk.col - 1 if not newlines else 0)
            if key in plain_shapes:
                out.append(Part(chunk.text[lead:].strip().rstrip(";").rstrip(), line, col))
            else:
                info = replace(seen[key], sql=chunk.text[lead:].strip(), line=line, col=col)
                out.append(Part(info.sql, info.line, info.col, info))
            continue
        plain = classify.plain_statements(chunk.text)
        if plain is not None:
            if key is not None and len(plain) == 1:
                plain_shapes.add(key)
            for statement in plain:
                out.append(Part(statement.sql, up.file_line(chunk.line + statement.line - 1),
                                statement.col + (chunk.col - 1 if statement.line == 1 else 0)))
            continue
        from pgsteady.sql.analysis import SqlSyntaxError, analyze  # noqa: PLC0415 - needed

        try:
            found = analyze(chunk.text)
        except SqlSyntaxError as exc:
            line = up.file_line(chunk.line + exc.line - 1)
            col = exc.col + (chunk.col - 1 if exc.line == 1 else 0)
            if _TEMPLATE.search(chunk.text):  # the SQL is fine once its tool renders it
                raise BadMigration(
                    f"{path}:{line}: a template ({{{{ ... }}}}), as pop (gobuffalo) and other "
                    f"Go tools render before running; pgsteady migrate runs SQL as written: "
                    f"run the folder with its own tool, or render it first") from None
            raise BadMigration(f"{path}:{line}: {exc.message} (column {col}); "
                               f"fix the SQL") from None
        for parsed in found:
            _refuse_client_copy(path, parsed, up.file_line(chunk.line + parsed.line - 1))
            keep = parsed.kind == "CREATE INDEX CONCURRENTLY"
            info = replace(parsed, line=up.file_line(chunk.line + parsed.line - 1),
                           col=parsed.col + (chunk.col - 1 if parsed.line == 1 else 0),
                           node=parsed.node if keep else None)
            out.append(Part(info.sql, info.line, info.col, info))
        if key is not None and len(found) == 1 and not keep:
            seen[key] = replace(found[0], node=None)
    return out


def _refuse_client_copy(path: Path, parsed: StatementInfo, line: int) -> None:
    """BadMigration for ``COPY ... FROM STDIN`` / ``TO STDOUT``: they need the client's copy
    channel (psql sends a dump's inline rows after the statement; Flyway does so too), which
    a migration's session does not have. Sent, the statement would leave the session waiting
    in COPY mode; the rows after it are not SQL."""
    if not parsed.kind.startswith("COPY") or parsed.node is None:
        return
    node = parsed.node
    if node.filename is not None or node.is_program:
        return  # a server-side file or program: an ordinary statement
    if node.is_from:
        raise BadMigration(
            f"{path}:{line}: COPY ... FROM STDIN takes its rows from the client (psql's or "
            f"Flyway's inline data), and pgsteady sends statements only; load the rows with "
            f"INSERT ... VALUES, or from a file on the server (COPY ... FROM 'path')")
    raise BadMigration(f"{path}:{line}: COPY ... TO STDOUT sends rows to the client, which a "
                       f"migration has nowhere to put; remove it, or COPY ... TO a server file")


def _fingerprint(text: str) -> str | None:
    try:
        return str(fingerprint(text))
    except ParseError:
        return None  # analyze() reports it, with its position


def _analysed(part: Part) -> StatementInfo:
    """A plain statement's analysis, placed where the statement is in its file."""
    from pgsteady.sql.analysis import analyze  # noqa: PLC0415 - only when asked

    [info] = analyze(part.sql)
    return replace(info, sql=part.sql, line=part.line, col=part.col, node=None)


def _kind(part: Part) -> str | None:
    """The kind when loading analysed it (plain statements are never transaction control)."""
    return part.info.kind if part.info is not None else None


def _unwrap(statements: list[Part]) -> list[Part]:
    """Other tools' files often hold their own ``BEGIN; ... COMMIT;``, around the whole file
    or part of it. Under the tool's transaction the BEGIN does nothing and the COMMIT only
    ends that transaction early; pgsteady runs the whole file in one anyway, so one such pair
    is dropped (same end state; all or nothing). Anything else (a ROLLBACK, a SAVEPOINT, a
    second pair) is left, and refused."""
    kinds = [_kind(part) for part in statements]
    begins = [i for i, kind in enumerate(kinds) if kind in ("TRANSACTION BEGIN",
                                                             "TRANSACTION START")]
    commits = [i for i, kind in enumerate(kinds) if kind == "TRANSACTION COMMIT"]
    others = [kind for kind in kinds if kind is not None and kind.startswith("TRANSACTION")]
    if len(begins) == 1 and len(commits) == 1 and begins[0] < commits[0] and len(others) == 2:
        return [part for i, part in enumerate(statements) if i not in (begins[0], commits[0])]
    return statements


def _check_statements(path: Path, parts: Iterable[Part],
                      transactional: bool, tool: str = "pgsteady") -> None:
    parts = list(parts)
    # Plain statements (no analysis yet) run in a transaction and never control it.
    statements = [part.info for part in parts if part.info is not None]
    for statement in statements:
        if statement.kind.startswith("TRANSACTION"):
            raise BadMigration(
                f"{path}:{statement.line}: {statement.kind.split()[-1]} is not allowed; "
                f"pgsteady runs each migration in its own transaction, remove it")
        if transactional and not statement.transactional:
            raise BadMigration(
                f"{path}:{statement.line}: {statement.kind} cannot run inside a transaction; "
                f"{_alone_hint(tool)}")
        if statement.kind == "CREATE INDEX CONCURRENTLY" and not statement.node.idxname:
            raise BadMigration(
                f"{path}:{statement.line}: CREATE INDEX CONCURRENTLY needs an index name, so "
                f"an invalid index left by a failed try can be found and dropped; name it")
    if not transactional and len(parts) != 1 and not registry.get(tool).stepwise:
        raise BadMigration(
            f"{path}:{parts[1].line if len(parts) > 1 else 1}: a "
            f"'{NO_TRANSACTION}' migration must hold exactly one statement, so a failure cannot "
            f"leave part of it applied; split it into one file per statement")


def tool_name(tool: str) -> str:
    """The tool as people write it (Prisma, Flyway, goose)."""
    return registry.get(tool).display if tool in registry.NAMES else tool


def _alone_hint(tool: str) -> str:
    hint = registry.get(tool).alone_hint if tool in registry.NAMES else None
    if hint is not None:
        return hint
    return f"{tool_name(tool)} runs it outside a transaction only when it " \
           f"is alone in its file; move it to a migration of its own"
