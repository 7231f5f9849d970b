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
    """The tool whose profile is used, and why (shown to the user); ``listing``: the folder
    as detection saw it, with the files it read whole, so they are not listed or read
    again."""

    __slots__ = ("listing", "reason", "tool")
    _UNCOMPARED = ("listing",)

    def __init__(self, tool: str, reason: str,
                 listing: registry.Listing | None = None) -> None:
        self.tool: Final = tool
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
        return Choice(registry.DEFAULT, "default")
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
    pop = popx.pop_marks(folder, [e.name for e in listing.entries if e.name.endswith(
        (".sql", ".fizz"))]) if listing else None
    if pop is not None:
        return Choice("popx", f"{pop}; pop runs each file in a transaction", listing)
    if names and all(golang_migrate.UP_DOWN.search(n) for n in names):
        if popx.names_fit(names):
            return Choice("popx", f"popx names (.autocommit., .<dialect>.) in {folder}",
                          listing)
        if golang_migrate.lint_names_fit(names):
            return Choice("golang-migrate", f"up/down (.nontx.) names in {folder}", listing)
    try:
        found = registry.detect(folder, listing)
    except registry.LayoutError as exc:
        return Choice(registry.DEFAULT, f"{exc}; assumed pgsteady, pass --tool", listing)
    if found == registry.DEFAULT:
        return Choice(found, "no other tool's layout found", listing)
    note = registry.get(found).guess_note
    return Choice(found, f"detected from {folder}" + (f"; {note}" if note else ""), listing)


def _head(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            return handle.read(65536).decode("utf-8", "replace")
    except OSError:
        return ""


def unit(path: Path, text: str, tool: str, display: str | None = None) -> Unit:
    """One file as ``tool`` runs it: its Up part (line numbers kept) and its transaction."""
    conventions = registry.get(tool)
    try:
        up, in_transaction = conventions.up_part(path, text)
    except registry.LayoutError as exc:
        raise UsageError(str(exc)) from None
    if conventions.migrates:
        if golang_migrate.NONTX.search(path.name):
            in_transaction = False
        if in_transaction is None and conventions.outside_words is not None:
            in_transaction = runs_in_transaction(conventions, up.text)
        text = "\n" * (up.first_line - 1) + up.text
    filled, names = fill_placeholders(text)
    return Unit(display or str(path), filled, in_transaction, conventions.sets_timeouts, names)


def runs_in_transaction(tool: registry.Tool, text: str) -> bool:
    """Whether ``tool`` runs a script in a transaction when it decides from the statements
    itself (Flyway's parser: :attr:`~pgsteady.tools.registry.Tool.outside_words`). A script
    the tool would refuse (a mix of both kinds), or one that does not parse (its error is
    reported when it is linted), is judged in a transaction, so its statements are
    reported."""
    words = tool.outside_words
    if words is None or not words.search(text):
        return True
    from pgsteady.lint import parse  # noqa: PLC0415 -- rare: such words in a script

    outside: list[bool] = []
    try:
        for statement in parse.statements(text, tool.outside_nodes.__contains__):
            if not statement.embedded:
                outside.append(tool.keeps_out(statement.kind, statement.node or {}))
    except parse.ParseFailure:
        return True
    return tool.in_transaction(None, outside) is not False


def folder_files(folder: Path, tool: str, not_run: list[Path] | None = None,  # noqa: PLR0917
                 listing: registry.Listing | None = None, downs: list[Path] | None = None,
                 why: dict[Path, str] | None = None) -> list[Path] | None:
    """The files of ``folder`` that ``tool`` applies, in its order (Up files only);
    None when the plain sorted ``*.sql`` walk is right (pgsteady, plain, alembic-sql).
    ``.sql`` files of the folder that the tool does not run go to ``not_run`` (a data script
    beside Diesel's folders, Flyway's repeatables), with the reason in ``why`` when it is
    more than that; golang-migrate's and popx's down scripts go to ``downs``: the summary
    names them. ``listing``: the folder as detection saw it, if it is this folder."""
    if listing is None or listing.folder != folder:
        listing = registry.Listing.of(folder)
    else:  # a scan uses up the heads it reads
        listing = registry.Listing(listing.folder, listing.entries, dict(listing.heads))
    skip = _Skips(downs, not_run, why)
    try:
        return registry.get(tool).lint_files(listing, skip.down, skip.other)
    except registry.LayoutError as exc:
        raise UsageError(str(exc)) from None


def files_for(paths: Iterable[str], tool: str, skipped: list[Path] | None = None,  # noqa: PLR0917
              not_run: list[Path] | None = None, listing: registry.Listing | None = None,
              why: dict[Path, str] | None = None) -> list[Path]:
    """Files as given; folders expanded to the files ``tool`` applies, in its order (down
    scripts beside their up scripts go to ``skipped``: see :func:`files.collect_files`; other
    ``.sql`` files the tool does not run, to ``not_run``, with the reason in ``why`` when
    there is more to say). ``listing``: a folder as detection saw it (:attr:`Choice.listing`)."""
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        found = (folder_files(path, tool, not_run, listing, skipped, why) if path.is_dir()
                 else None)
        if found is None:
            out += collect_files([name], skipped)
        elif not found:
            raise UsageError(f"no {tool} migrations under {name}")
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
        if self.why is not None and reason:
            self.why[path] = reason


def load(files: Iterable[Path], tool: str, heads: dict[Path, bytes] | None = None,
         ) -> tuple[list[Unit], dict[int, FileReport]]:
    """Each file as a unit for ``tool``; files that are not UTF-8 become reports (by index)
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
            units.append(unit(path, text, tool))
    return units, broken


def history_for(folder: str, checked: list[Path], tool: str) -> list[Unit]:
    """The files of ``folder`` that run before the first checked file (all of them if the
    checked files are not in it), as units to replay."""
    files = files_for([folder], tool)
    resolved = [p.resolve() for p in files]
    firsts = [resolved.index(c.resolve()) for c in checked if c.resolve() in resolved]
    before = files[:min(firsts)] if firsts else files
    return load(before, tool)[0]


# -- django: Django writes the SQL (pgsteady.django.lint); tools.django its conventions ---


def django_unit(display: str, sql: str, *, atomic: bool, engine_sets_timeouts: bool) -> Unit:
    """A Django migration's SQL as Django runs it: one transaction unless ``atomic = False``
    (then each statement commits on its own); timeouts set when the ENGINE is pgsteady's."""
    return Unit(display, sql, atomic, engine_sets_timeouts)
