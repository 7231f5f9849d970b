"""Migration files as the linter reads them: the text, the runner's conventions, the order.

Importable without the parser (a warm cache needs only this and :mod:`report`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pgsteady._errors_root import UsageError
from pgsteady.migrate.lint.report import SyntaxProblem


@dataclass(frozen=True)
class Unit:
    """One file as its runner runs it: the text to lint and the runner's conventions.

    ``in_transaction`` None means "in one transaction unless its only statement cannot run in
    one" (Prisma, golang-migrate: the file goes as one multi-statement query); a file's own
    ``-- pgsteady: no-transaction`` header is honoured when it is True. ``text`` is the Up
    part, padded with blank lines so line numbers are the file's.
    """

    display: str
    text: str
    in_transaction: bool | None = True
    runner_timeouts: bool = True


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    starts = [0, *(m.end() for m in re.finditer(b"\n", data[:offset]))]
    index = bisect_right(starts, offset) - 1
    return index + 1, len(data[starts[index]:offset].decode("utf-8", "ignore")) + 1


def read_sql(path: Path, display: str | None = None) -> str | SyntaxProblem:
    """A file's text; a SyntaxProblem if it is not UTF-8; UsageError if unreadable."""
    name = display or str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, col = _line_col(data, exc.start)
        return SyntaxProblem(name, line, col, "not valid UTF-8")


def collect_files(paths: Iterable[str]) -> list[Path]:
    """Files as given, and ``*.sql`` under folders (sorted); a missing path is a usage error."""
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.sql") if p.is_file())
            if not found:
                raise UsageError(f"no .sql files under {name}")
            out += found
        elif path.is_file():
            out.append(path)
        else:
            raise UsageError(f"{name}: no such file or folder")
    return out
