"""popx (ory) and gobuffalo/pop, whose popx is a fork:
``<version>_<name>[.<dialect>][.autocommit].<up|down>.sql`` (pop's ``.fizz`` files are its Go
DSL, not SQL); a transaction per file unless named ``.autocommit.``; files for other databases
are skipped, and a version's PostgreSQL file replaces its generic one. ``pgsteady lint``
judges such folders; migrate does not run them."""

from __future__ import annotations

import re
from pathlib import Path

from pgsteady.tools._base import Tool, UpPart

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pgsteady.tools._base import Listing

# popx's own pattern (match.go: ParseMigrationFilename): no dot in the name; an
# ``.autocommit`` where the dialect goes means every database. Its PostgreSQL dialect and
# pop's synonyms for it; any other dialect is another database's file (or one popx ignores).
NAME = re.compile(r"^(?P<version>\d+)_[^.]+(?:\.(?P<dialect>[a-z0-9]+))?"
                  r"(?P<autocommit>\.autocommit)?\.(?P<direction>up|down)\.sql$")
_POSTGRES = frozenset({"postgres", "postgresql", "pg", "pgx"})
_MARK = re.compile(r"\.(autocommit|postgres|postgresql|pg|pgx|mysql|mariadb|sqlite3?|"
                   r"cockroach|cockroachdb|crdb)\.(up|down)\.sql$|\.autocommit\.")


class Popx(Tool):
    name = "popx"
    display = "popx"
    migrates = False

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        # a transaction per file (popx's Runner), none for autocommit ones
        match = NAME.match(path.name)
        return UpPart(text), not (match and (match["autocommit"]
                                             or match["dialect"] == "autocommit"))

    def lint_files(self, listing: Listing, down: Callable[[Path], None],
                   other: Callable[[Path, str], None]) -> list[Path] | None:
        return lint_files(listing.folder, down, other)


# gobuffalo/pop's own pattern (migrator.go): its files may also be .fizz (pop's DSL, not SQL)
POP_NAME = re.compile(r"^(\d+)_([^.]+)(\.[a-z0-9]+)?\.(up|down)\.(sql|fizz)$")


def pop_marks(folder: Path, names: Sequence[str]) -> str | None:
    """Why the folder is gobuffalo/pop's (whose runner, as popx's, runs each file in a
    transaction), or None: its names all fit pop's pattern and it holds ``.fizz``
    migrations, or a pop ``database.yml`` is beside it or one level up."""
    if not names or not all(POP_NAME.match(n) for n in names):
        return None
    fizz = [n for n in names if n.endswith(".fizz")]
    if fizz:
        return f"pop (gobuffalo): .fizz migrations in {folder} ({fizz[0]})"
    for place in (folder.parent, folder.parent.parent):
        if (place / "database.yml").is_file():
            return f"pop (gobuffalo): {place / 'database.yml'} beside the migrations"
    return None


def names_fit(names: Sequence[str]) -> bool:
    """Whether ``.sql`` names (all up/down ones) are popx's: one shows its marks, all fit."""
    return any(_MARK.search(n) for n in names) and all(NAME.match(n) for n in names)


def lint_files(folder: Path, down: Callable[[Path], None],
               other: Callable[[Path, str], None]) -> list[Path]:
    """The up files popx runs on PostgreSQL, in its order, as its migration box finds them:
    every file under ``folder`` (subfolders too, as ``fs.WalkDir``), up files only, a
    version's PostgreSQL file in place of its generic one, sorted by version as text. Down
    scripts go to ``down``; the rest it does not run to ``other``, with the reason."""
    found = sorted((p for p in folder.rglob("*.sql") if p.is_file()),
                   key=lambda p: p.relative_to(folder).parts)  # WalkDir's lexical order
    for path in sorted(folder.rglob("*.fizz")):
        other(path, "a fizz migration (pop's Go DSL, not SQL)")
    chosen: dict[str, tuple[Path, bool]] = {}  # version -> (file, for PostgreSQL only)
    for path in found:
        match = NAME.match(path.name)
        if match is None:
            other(path, "popx runs only <version>_<name>[.<dialect>][.autocommit]"
                        ".<up|down>.sql (no dot in the name)")
            continue
        if match["direction"] == "down":
            down(path)
            continue
        dialect = match["dialect"]
        if dialect is not None and dialect != "autocommit" and dialect not in _POSTGRES:
            other(path, f"for {dialect}: popx runs it on that database only")
            continue
        specific = dialect in _POSTGRES
        version = match["version"]
        kept = chosen.get(version)
        if kept is None or (specific and not kept[1]):
            if kept is not None:
                other(kept[0], f"{path.name} runs instead (this version's PostgreSQL file)")
            chosen[version] = path, specific
        elif specific:  # popx keeps the last of two PostgreSQL files (a map by version)
            other(kept[0], f"{path.name} runs instead (the same version)")
            chosen[version] = path, specific
        else:
            other(path, f"{kept[0].name} runs instead (" + (
                "this version's PostgreSQL file)" if kept[1] else "the same version)"))
    return [chosen[version][0] for version in sorted(chosen)]


TOOL = Popx()
