"""Runner profiles: how each migration tool runs a file, so lint judges it as it will run.

Whether a file runs inside a transaction decides whether ``CREATE INDEX CONCURRENTLY`` fails
and whether a ``VALIDATE`` keeps the ``ADD``'s lock; whether the tool sets ``lock_timeout``
decides whether a missing one is a risk; and only the Up part of a file runs. Each tool's
conventions live in its module of :mod:`pgsteady.tools` (shared with ``pgsteady migrate``:
one definition); this module picks the profile for the files given and turns a file into a
:class:`~pgsteady.lint.engine.Unit`.

=================  ==================================================  ===============
profile            transaction                                          sets timeouts
=================  ==================================================  ===============
pgsteady           one per file, unless ``-- pgsteady: no-transaction``  yes
prisma             the file is one multi-statement query: one implicit   no
                   transaction, unless it holds a single statement
golang-migrate     as prisma (``*.up.sql`` only); ``.nontx.`` names run    no
                   outside one, other databases' files skipped
popx               one per file unless named ``.autocommit.`` (ory/popx);   no
                   ``.<dialect>.`` files for other databases skipped
goose              one per file unless ``-- +goose NO TRANSACTION``;    no
                   only the ``-- +goose Up`` section
dbmate             one per file unless ``-- migrate:up transaction:false``; no
                   only the ``-- migrate:up`` section
flyway             one per script, none if no statement can run in    no
                   one (``CONCURRENTLY``, ``VACUUM``, ...; Flyway
                   refuses a mix), unless ``executeInTransaction`` says
diesel             one per ``up.sql`` unless its ``metadata.toml`` says   no
                   ``run_in_transaction = false`` (then as prisma)
sql-migrate        one per file unless ``-- +migrate Up notransaction``; no
                   only the ``-- +migrate Up`` sections
tern               one per file unless ``---- tern: disable-tx ----``;  no
                   only what comes before the drop part
sqitch             none added: ``deploy/`` scripts carry BEGIN/COMMIT    no
alembic-sql        none added: ``alembic upgrade --sql`` writes them     no
plain              none (``psql -f``: each statement commits)           no
django             one per migration unless ``atomic = False`` (then     with ENGINE
                   each statement commits); the SQL is Django's own      pgsteady.django
                   (``sqlmigrate``), see :func:`django_unit`
=================  ==================================================  ===============
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from pgsteady._errors_root import UsageError
from pgsteady._record import Record
from pgsteady.lint.files import Unit, collect_files, read_sql
from pgsteady.lint.report import FileReport, SyntaxProblem
from pgsteady.sql.text import fill_placeholders
from pgsteady.tools import alembic, golang_migrate, popx, registry, sqitch
from pgsteady.tools.diesel import VERSION_FOLDER

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Final

#: Profiles lint knows; the first nine are :data:`pgsteady.tools.registry.NAMES`.
NAMES = registry.PROFILES


class Choice(Record):
    """The profile used, and why (shown to the user); ``listing``: the folder as detection
    saw it, with the files it read whole, so they are not listed or read again."""

    __slots__ = ("listing", "reason", "runner")
    _UNCOMPARED = ("listing",)

    def __init__(self, runner: str, reason: str,
                 listing: registry.Listing | None = None) -> None:
        self.runner: Final = runner
        self.reason: Final = reason
        self.listing: Final = listing


def check_name(name: str, where: str = "--tool") -> str:
    """``name`` if it is a profile; UsageError listing them if not."""
    if name not in NAMES and name != "auto":
        raise UsageError(f"{where}: no runner profile {name!r}; use one of "
                         f"{', '.join(NAMES)} or auto")
    return name


def detect(paths: Iterable[str]) -> Choice:
    """The profile the folder's layout makes unambiguous; ``pgsteady`` otherwise."""
    given = [Path(p) for p in paths]
    if not given:
        return Choice("pgsteady", "default")
    first = given[0]
    folder = first if first.is_dir() else first.parent
    if first.is_file() and (first.name == "migration.sql" or (
            first.name == "up.sql" and VERSION_FOLDER.match(folder.name))):
        folder = folder.parent  # prisma's <timestamp>_<name>/migration.sql, diesel's up.sql
    for place in (folder, *list(folder.parents)[:2]):
        if sqitch.plan_in(place):
            return Choice("sqitch", f"sqitch.plan in {place}")
    if first.is_file() and alembic.writes_version(_head(first)):
        return Choice("alembic-sql", f"{first} writes alembic_version")
    try:
        listing = registry.Listing.of(folder)
    except registry.LayoutError:
        listing = None
    names = [e.name for e in listing.entries if e.name.endswith(".sql")] if listing else []
    if names and all(golang_migrate.UP_DOWN.search(n) for n in names):
        if popx.names_fit(names):
            return Choice("popx", f"popx names (.autocommit., .<dialect>.) in {folder}",
                          listing)
        if golang_migrate.lint_names_fit(names):
            return Choice("golang-migrate", f"up/down (.nontx.) names in {folder}", listing)
    try:
        found = registry.detect(folder, listing)
    except registry.LayoutError as exc:
        return Choice("pgsteady", f"{exc}; assumed pgsteady, pass --tool", listing)
    if found == "pgsteady":
        return Choice("pgsteady", "no other tool's layout found", listing)
    return Choice(found, f"detected from {folder}", listing)


def _head(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            return handle.read(65536).decode("utf-8", "replace")
    except OSError:
        return ""


def unit(path: Path, text: str, runner: str, display: str | None = None) -> Unit:
    """One file as ``runner`` runs it: its Up part (line numbers kept) and its transaction."""
    tool = registry.get(runner)
    try:
        up, in_transaction = tool.up_part(path, text)
    except registry.LayoutError as exc:
        raise UsageError(str(exc)) from None
    if tool.layout:
        if golang_migrate.NONTX.search(path.name):
            in_transaction = False
        if runner == "flyway" and in_transaction is None:
            in_transaction = not flyway_outside(up.text)
        text = "\n" * (up.first_line - 1) + up.text
    filled, names = fill_placeholders(text)
    return Unit(display or str(path), filled, in_transaction, tool.sets_timeouts, names)


# The statements Flyway's PostgreSQL parser runs outside a transaction (its patterns, on the
# statement's first words), as parse-tree kinds; the words make a quick test first.
_FLYWAY_OUTSIDE_WORDS = re.compile(
    r"\b(concurrently|database|tablespace|subscription|system|vacuum|discard|reindex)\b",
    re.IGNORECASE)
_FLYWAY_OUTSIDE = frozenset({"CreatedbStmt", "DropdbStmt", "CreateTableSpaceStmt",
                             "DropTableSpaceStmt", "CreateSubscriptionStmt",
                             "DropSubscriptionStmt", "AlterSystemStmt", "IndexStmt", "DropStmt",
                             "ReindexStmt", "VacuumStmt", "DiscardStmt"})
_REINDEX_MANY = frozenset({"REINDEX_OBJECT_SCHEMA", "REINDEX_OBJECT_SYSTEM",
                           "REINDEX_OBJECT_DATABASE"})


def flyway_outside(text: str) -> bool:
    """True if Flyway runs this script without a transaction (no ``executeInTransaction``
    set): every statement in it is one Flyway's parser keeps out of a transaction, ``CREATE
    [UNIQUE] INDEX CONCURRENTLY``, ``DROP INDEX CONCURRENTLY``, ``CREATE/DROP
    DATABASE|TABLESPACE|SUBSCRIPTION``, ``ALTER SYSTEM``, ``REINDEX SCHEMA|DATABASE|SYSTEM``,
    ``VACUUM`` or ``DISCARD ALL``. A script that mixes them with others is refused by Flyway
    (unless ``mixed=true``) and is judged in a transaction, so the statement is reported;
    one that does not parse likewise (its error is reported when it is linted)."""
    if not _FLYWAY_OUTSIDE_WORDS.search(text):
        return False
    from pgsteady.lint import parse  # noqa: PLC0415 -- rare: such words in a script

    outside = False
    try:
        for statement in parse.statements(text, _FLYWAY_OUTSIDE.__contains__):
            if statement.embedded:
                continue
            if not _flyway_keeps_out(statement.kind, statement.node or {}):
                return False
            outside = True
    except parse.ParseFailure:
        return False
    return outside


def _flyway_keeps_out(kind: str, node: dict[str, object]) -> bool:
    if kind in ("IndexStmt", "DropStmt"):
        return bool(node.get("concurrent")) and (
            kind == "IndexStmt" or node.get("removeType") == "OBJECT_INDEX")
    if kind == "ReindexStmt":
        return node.get("kind") in _REINDEX_MANY
    if kind == "VacuumStmt":
        return bool(node.get("is_vacuumcmd"))
    if kind == "DiscardStmt":
        return node.get("target") == "DISCARD_ALL"
    return kind in _FLYWAY_OUTSIDE


def folder_files(folder: Path, runner: str, not_run: list[Path] | None = None,  # noqa: PLR0917
                 listing: registry.Listing | None = None, downs: list[Path] | None = None,
                 why: dict[Path, str] | None = None) -> list[Path] | None:
    """The files of ``folder`` that ``runner`` applies, in its order (Up files only);
    None when the plain sorted ``*.sql`` walk is right (pgsteady, plain, alembic-sql).
    ``.sql`` files of the folder that the tool does not run go to ``not_run`` (a data script
    beside Diesel's folders, Flyway's repeatables), with the reason in ``why`` when it is
    more than that; golang-migrate's and popx's down scripts go to ``downs``: the summary
    names them. ``listing``: the folder as detection saw it, if it is this folder."""
    if listing is not None and listing.folder != folder:
        listing = None
    skip = _Skips(downs, not_run, why)
    if runner == "popx":
        return popx.lint_files(folder, skip.down, skip.other)
    if runner == "sqitch":
        return sqitch.deploy_files(folder)
    if runner == "golang-migrate":
        entries = listing.entries if listing is not None else registry.Listing.of(folder).entries
        return golang_migrate.lint_files(entries, skip.down, skip.other)
    if runner in registry.NAMES and runner != "pgsteady":
        seen = None if listing is None else registry.Listing(  # scan uses up what it reads
            listing.folder, listing.entries, dict(listing.heads))
        try:
            scan = registry.scan(folder, runner, seen)
        except registry.LayoutError as exc:
            raise UsageError(str(exc)) from None
        for item in scan.skipped:
            if item.said and item.path.suffix == ".sql" and item.path.is_file():
                skip.other(item.path, item.reason)
        if not_run is not None:
            not_run += [f.path for f in scan.files if f.elsewhere is not None]
        return [f.path for f in scan.files if f.elsewhere is None]
    return None


def files_for(paths: Iterable[str], runner: str, skipped: list[Path] | None = None,  # noqa: PLR0917
              not_run: list[Path] | None = None, listing: registry.Listing | None = None,
              why: dict[Path, str] | None = None) -> list[Path]:
    """Files as given; folders expanded to the files ``runner`` applies, in its order (down
    scripts beside their up scripts go to ``skipped``: see :func:`files.collect_files`; other
    ``.sql`` files the runner does not run, to ``not_run``, with the reason in ``why`` when
    there is more to say). ``listing``: a folder as detection saw it (:attr:`Choice.listing`)."""
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        found = (folder_files(path, runner, not_run, listing, skipped, why) if path.is_dir()
                 else None)
        if found is None:
            out += collect_files([name], skipped)
        elif not found:
            raise UsageError(f"no {runner} migrations under {name}")
        else:
            out += found
    return out


class _Skips:
    """Where :func:`folder_files` puts what it does not lint (each list optional)."""

    def __init__(self, downs: list[Path] | None, not_run: list[Path] | None,
                 why: dict[Path, str] | None) -> None:
        self.downs = downs
        self.not_run = not_run
        self.why = why

    def down(self, path: Path) -> None:
        if self.downs is not None:
            self.downs.append(path)

    def other(self, path: Path, reason: str) -> None:
        if self.not_run is not None:
            self.not_run.append(path)
        if self.why is not None:
            self.why[path] = reason


def load(files: Iterable[Path], runner: str, heads: dict[Path, bytes] | None = None,
         ) -> tuple[list[Unit], dict[int, FileReport]]:
    """Each file as a unit for ``runner``; files that are not UTF-8 become reports (by index)
    and an empty unit in their place, so the order and the count stay. ``heads``: files
    already read whole (:attr:`Choice.listing`), each used once."""
    units: list[Unit] = []
    broken: dict[int, FileReport] = {}
    for path in files:
        text = read_sql(path, heads=heads)
        if isinstance(text, SyntaxProblem):
            broken[len(units)] = FileReport(str(path), syntax_error=text)
            units.append(Unit(str(path), ""))
        else:
            units.append(unit(path, text, runner))
    return units, broken


def history_for(folder: str, checked: list[Path], runner: str) -> list[Unit]:
    """The files of ``folder`` that run before the first checked file (all of them if the
    checked files are not in it), as units to replay."""
    files = files_for([folder], runner)
    resolved = [p.resolve() for p in files]
    firsts = [resolved.index(c.resolve()) for c in checked if c.resolve() in resolved]
    before = files[:min(firsts)] if firsts else files
    return load(before, runner)[0]


# -- django: Django writes the SQL (pgsteady.django.lint); tools.django its conventions ---


def django_unit(display: str, sql: str, *, atomic: bool, engine_sets_timeouts: bool) -> Unit:
    """A Django migration's SQL as Django runs it: one transaction unless ``atomic = False``
    (then each statement commits on its own); timeouts set when the ENGINE is pgsteady's."""
    return Unit(display, sql, atomic, engine_sets_timeouts)
