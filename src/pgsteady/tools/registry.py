"""The tools pgsteady knows, by name, each module imported on first use; and what is asked of
a folder without knowing its tool yet: which tool it is (:func:`detect`), and its migrations
(:func:`scan`).

``NAMES``: the layouts ``pgsteady migrate`` runs (``--tool``); ``PROFILES``: those and the
tools lint judges but migrate does not run; ``HISTORIES``: every tool whose history table
pgsteady reads.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from pgsteady.tools._base import (
    LayoutError,
    Listing,
    LockPlace,
    MigrationFile,
    Row,
    Scan,
    Skipped,
    Tool,
    UpPart,
    read,
)

__all__ = ["DEFAULT", "HISTORIES", "NAMES", "PROFILES", "LayoutError", "Listing", "LockPlace",
           "MigrationFile", "Row", "Scan", "Skipped", "Tool", "UpPart", "detect", "get", "read",
           "scan", "up_part"]

#: Tool name -> (module of this package, the attribute holding its Tool). Adding a tool: its
#: module, its line here (in the place it should have in lists and detection).
MODULES: dict[str, tuple[str, str]] = {
    "pgsteady": ("pgsteady", "TOOL"),
    "prisma": ("prisma", "TOOL"),
    "goose": ("goose", "TOOL"),
    "golang-migrate": ("golang_migrate", "TOOL"),
    "dbmate": ("dbmate", "TOOL"),
    "flyway": ("flyway", "TOOL"),
    "diesel": ("diesel", "TOOL"),
    "sql-migrate": ("sql_migrate", "TOOL"),
    "tern": ("tern", "TOOL"),
    "sqlx": ("sqlx", "TOOL"),
    "popx": ("popx", "TOOL"),
    "sqitch": ("sqitch", "TOOL"),
    "alembic-sql": ("alembic", "SQL_PROFILE"),
    "plain": ("plain", "TOOL"),
    "django": ("django", "TOOL"),
    "alembic": ("alembic", "TOOL"),
}
#: The tool of a folder that shows no other tool's marks.
DEFAULT = "pgsteady"
#: The layouts migrate runs, in the order lists show them.
NAMES = ("pgsteady", "prisma", "goose", "golang-migrate", "dbmate", "flyway", "diesel",
         "sql-migrate", "tern", "sqlx")
#: What lint's ``--tool`` takes: the layouts, then the tools whose files lint only judges.
PROFILES = (*NAMES, "popx", "sqitch", "alembic-sql", "plain", "django")
#: Tools whose history table pgsteady reads (and, but for Alembic's, writes).
HISTORIES = (*NAMES, "alembic")
# Detection asks the layouts in this order; the first that claims an entry has it.
_DETECT_ORDER = ("prisma", "diesel", "golang-migrate", "flyway", "goose", "dbmate",
                 "sql-migrate", "tern", "pgsteady")

_loaded: dict[str, Tool] = {}


def get(name: str) -> Tool:
    """The tool called ``name``, its module imported on first use; KeyError if none is."""
    tool = _loaded.get(name)
    if tool is None:
        module, attribute = MODULES[name]
        tool = getattr(importlib.import_module(f"pgsteady.tools.{module}"), attribute)
        assert isinstance(tool, Tool)
        _loaded[name] = tool
    return tool


def _migrating(name: str) -> Tool:
    if name not in NAMES:
        raise LayoutError(f"unknown layout {name!r}; use one of {', '.join(NAMES)}")
    return get(name)


def scan(folder: str | Path, tool: str, listing: Listing | None = None) -> Scan:
    """Every migration of ``tool`` in ``folder``, in the tool's order, and what was skipped.
    ``listing``: the folder as :func:`detect` saw it, so it is not listed or read twice."""
    return _migrating(tool).scan(listing if listing is not None else Listing.of(folder))


def up_part(path: Path, text: str, tool: str) -> tuple[UpPart, bool | None]:
    """The Up part of one file of ``tool`` and whether it runs in a transaction (None: as
    its statements allow); for lint, which gets files rather than folders."""
    return _migrating(tool).up_part(path, text)


def detect(folder: str | Path, listing: Listing | None = None) -> str:
    """The layout of ``folder`` when its files say so unambiguously; ``pgsteady`` when no other
    tool's marks are found; LayoutError naming the candidates when several fit. Files read
    whole on the way are kept in ``listing`` for :func:`scan`."""
    path = Path(folder)
    seen = listing if listing is not None else Listing.of(path)
    tools = [get(name) for name in _DETECT_ORDER]
    found: set[str] = set()
    heads: dict[Path, _Head] = {}
    for entry in seen.entries:
        if entry.is_dir:
            claim = next((t for t in tools if t.claims_dir(entry)), None)
        else:
            head = heads[entry.path] = _Head(seen, entry.path)
            claim = next((t for t in tools if t.claims_file(entry, head)), None)
        if claim is not None:
            found.add(claim.name)
    if any(get(name).hides_plain for name in found):
        found.discard("pgsteady")
    others = found - {"pgsteady"}
    if len(others) > 1:
        raise LayoutError(f"{path}: cannot tell the layout, it looks like "
                          f"{' and '.join(sorted(others))}; pass --tool")
    if others and "pgsteady" in found:
        # goose/dbmate folders whose every file has its marks are unambiguous; a mix is not
        raise LayoutError(f"{path}: cannot tell the layout: some files look like "
                          f"{next(iter(others))} and some like plain pgsteady files; pass "
                          f"--tool")
    chosen = next(iter(others)) if others else DEFAULT
    for name in NAMES:  # a tool whose files read as another's, told apart by its folder
        tool = get(name)
        if chosen in tool.refines and tool.claims_folder(
                seen, lambda p: heads.setdefault(p, _Head(seen, p))()):
            return name
    return chosen


class _Head:
    """A file's first 64 KiB, read when a tool first asks and kept for the next one."""

    __slots__ = ("_listing", "_path", "_text")

    def __init__(self, listing: Listing, path: Path) -> None:
        self._listing = listing
        self._path = path
        self._text: str | None = None

    def __call__(self) -> str:
        if self._text is None:
            self._text = self._listing.head(self._path)
        return self._text
