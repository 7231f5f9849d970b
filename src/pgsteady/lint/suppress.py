"""Ignore comments: ``-- pgsteady: ignore <rule-id> -- <reason>`` and ``ignore-file``.

An ``ignore`` covers the statement it sits in, the statement it follows on the same line, or
else the next statement; ``ignore-file`` covers the whole file. Text that only looks like an
ignore inside a string literal is not one (the statement is scanned to make sure).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Collection

from pgsteady.sql import pglast_loader

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Final

    from pglast import parser as pg
else:
    pg = pglast_loader.parser()  # the C parser without pglast's AST classes (start-up)

UNUSED_IGNORE = "unused-ignore"
IGNORE_WITHOUT_REASON = "ignore-without-reason"
IGNORE = re.compile(r"--[ \t]*pgsteady:[ \t]*(ignore-file|ignore)(?![\w-])([^\n\r]*)")


class Source:
    """One parsed file: its text, its UTF-8 bytes and where each statement starts and ends."""

    __slots__ = ("data", "ends", "path", "starts", "text")

    def __init__(self, path: str, text: str, data: bytes, starts: list[int],
                 ends: list[int]) -> None:
        self.path: Final = path
        self.text: Final = text
        self.data: Final = data
        self.starts: Final = starts
        self.ends: Final = ends


class Ignore:
    """One rule id named by one ignore comment, and whether it suppressed anything."""

    __slots__ = ("offset", "rule", "used")

    def __init__(self, rule: str, offset: int, used: bool = False) -> None:
        self.rule = rule
        self.offset = offset
        self.used = used


def ignore_target(source: Source, offset: int) -> int:
    """The statement an ignore comment at ``offset`` covers; -1 none, -2 not a comment.

    Inside a statement: that statement. After a statement on the same line: that one.
    Otherwise the next statement.
    """
    data, starts, ends = source.data, source.starts, source.ends
    index = bisect_right(starts, offset) - 1
    if index >= 0 and offset < ends[index]:
        begin = starts[index]
        relative = len(data[begin:offset].decode("utf-8", "ignore"))
        tokens = pg.scan(data[begin:ends[index]].decode("utf-8", "ignore"))
        if not any(t.start == relative and t.name == "SQL_COMMENT" for t in tokens):
            return -2
        return index
    if index >= 0 and b"\n" not in data[ends[index]:offset]:
        return index
    return index + 1 if index + 1 < len(starts) else -1


#: (statement index, rule id) -> ignore; rule id -> ignore; (rule id, offset, detail).
Ignores = tuple[dict[tuple[int, str], "Ignore"], dict[str, "Ignore"], list[tuple[str, int, str]]]


def parse_ignores(source: Source, enabled: Collection[str], known: Collection[str]) -> Ignores:
    """Ignore comments: per statement, for the whole file, and malformed ones.

    ``known`` is every rule id; ``enabled`` those that run (ignores of the others are moot).
    """
    per_statement: dict[tuple[int, str], Ignore] = {}
    whole_file: dict[str, Ignore] = {}
    problems: list[tuple[str, int, str]] = []
    text = source.text
    if "pgsteady:" not in text:
        return per_statement, whole_file, problems
    for match in IGNORE.finditer(text):
        offset = match.start() if text.isascii() else len(text[:match.start()].encode())
        target = ignore_target(source, offset)
        if target == -2:  # inside a string literal, not a comment
            continue
        ids_part, _, reason = match[2].partition("--")
        ids = [i for i in re.split(r"[\s,]+", ids_part.strip()) if i]
        if not ids:
            problems.append((UNUSED_IGNORE, offset, "the ignore comment names no rule"))
            continue
        if not reason.strip():
            problems.append((IGNORE_WITHOUT_REASON, offset,
                             f"add the reason: -- pgsteady: {match[1]} "
                             f"{' '.join(ids)} -- <why it is safe here>"))
        for rule_id in ids:
            if rule_id not in known:
                problems.append((UNUSED_IGNORE, offset, f"there is no rule `{rule_id}`"))
                continue
            if rule_id not in enabled:
                continue  # turned off by configuration: nothing to suppress, no noise
            if match[1] == "ignore-file":
                whole_file.setdefault(rule_id, Ignore(rule_id, offset))
            elif target >= 0:
                per_statement.setdefault((target, rule_id), Ignore(rule_id, offset))
            else:
                problems.append((UNUSED_IGNORE, offset,
                                 f"`{rule_id}`: no statement follows the ignore comment"))
    return per_statement, whole_file, problems
