"""Migration files as the linter reads them: the text, the runner's conventions, the order.

Importable without the parser (a warm cache needs only this and :mod:`report`).
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from collections.abc import Iterable
from pathlib import Path

from pgsteady._errors_root import UsageError
from pgsteady._record import Record
from pgsteady.lint.report import SyntaxProblem

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Final


class Unit(Record):
    """One file as its runner runs it: the text to lint and the runner's conventions.

    ``in_transaction`` None means "in one transaction unless its only statement cannot run in
    one" (Prisma, golang-migrate: the file goes as one multi-statement query); a file's own
    ``-- pgsteady: no-transaction`` header is honoured when it is True. ``text`` is the Up
    part, padded with blank lines so line numbers are the file's, with its template
    placeholders filled in (:func:`pgsteady.sql.text.fill_placeholders`).
    """

    __slots__ = ("display", "in_transaction", "placeholders", "runner_timeouts", "text")

    def __init__(self, display: str, text: str, in_transaction: bool | None = True,
                 runner_timeouts: bool = True, placeholders: tuple[str, ...] = ()) -> None:
        self.display: Final = display
        self.text: Final = text
        self.in_transaction: Final = in_transaction
        self.runner_timeouts: Final = runner_timeouts
        # Template placeholders read as names, one per placeholder (sqltext.fill_placeholders).
        self.placeholders: Final = placeholders


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    starts = [0, *(m.end() for m in re.finditer(b"\n", data[:offset]))]
    index = bisect_right(starts, offset) - 1
    return index + 1, len(data[starts[index]:offset].decode("utf-8", "ignore")) + 1


def read_sql(path: Path, display: str | None = None, heads: dict[Path, bytes] | None = None,
             ) -> str | SyntaxProblem:
    """A file's text; a SyntaxProblem if it is not UTF-8; UsageError if unreadable.
    ``heads``: files already read whole (runner detection reads them), used once."""
    name = display or str(path)
    try:
        data = heads.pop(path, None) if heads else None
        if data is None:
            data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, col = _line_col(data, exc.start)
        return SyntaxProblem(name, line, col, "not valid UTF-8")


def collect_files(paths: Iterable[str], skipped: list[Path] | None = None) -> list[Path]:
    """Files as given, and ``*.sql`` under folders (in :func:`natural_key` order); a missing
    path is a usage error.

    In a folder, a down script beside its up script (diesel's and Hasura's ``down.sql`` next
    to ``up.sql``, ``x.down.sql`` next to ``x.up.sql``) is left out, and added to ``skipped``:
    it only runs on a rollback, and replayed in order it would undo the schema the rules
    ask about. Given by name, it is linted like any file."""
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = sorted(_sql_files(path), key=natural_key)
            if not found:
                raise UsageError(f"no .sql files under {name}")
            for file in found:
                if _up_of(file) is not None:
                    if skipped is not None:
                        skipped.append(file)
                else:
                    out.append(file)
        elif path.is_file():
            out.append(path)
        else:
            raise UsageError(f"{name}: no such file or folder")
    return out


def _sql_files(folder: Path) -> list[Path]:
    """``*.sql`` files under ``folder``, as ``rglob`` and ``is_file`` find them (links to
    files count, linked folders are not entered, unreadable folders are passed over), with
    the kinds ``os.scandir`` already knows instead of a ``stat`` per file."""
    found: list[Path] = []
    folders = [folder]
    while folders:  # bounded: each folder of the tree once, links to folders not followed
        top = folders.pop()
        try:
            with os.scandir(top) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(top / entry.name)
                elif entry.name.endswith(".sql") and entry.is_file():
                    found.append(top / entry.name)
            except OSError:
                continue
    return found


_DIGITS = re.compile(r"(\d+)")


def natural_key(path: Path) -> tuple[tuple[tuple[str | int, ...], ...], str]:
    """Sort ``v1.9/`` before ``v1.10/`` and ``2_b.sql`` before ``10_a.sql``, as version
    folders are meant (``ls -v``); zero-padded and timestamped names sort as before."""
    return (tuple(tuple(int(c) if i % 2 else c for i, c in enumerate(_DIGITS.split(part)))
                  for part in path.parts), str(path))


_DOWN = re.compile(r"^(?P<stem>.+)\.down(?P<rest>(?:\.[^.]+)*)\.sql$")


def _up_of(path: Path) -> Path | None:
    """The up script that ``path`` is the down half of, if it is one and the up one exists."""
    if path.name == "down.sql":
        up = path.with_name("up.sql")
    else:
        match = _DOWN.match(path.name)
        if match is None:
            return None
        up = path.with_name(f"{match['stem']}.up{match['rest']}.sql")
    return up if up.is_file() else None
