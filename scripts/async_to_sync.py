"""Generate ``Steady`` (src/pgsteady/_sqla_sync.py) from ``AsyncSteady`` (_sqla_async.py).

One source, as psycopg_pool generates its sync pool from the async one: the sync module is
never edited by hand. The transformation is small and token-based, so comments and layout
survive:

- ``if True:  # ASYNC`` blocks keep their ``else:`` part (dedented), or vanish without one;
  a line ending in ``# async only`` vanishes;
- ``async`` before ``def``/``with``/``for`` and every ``await`` are dropped;
- names are mapped in pairs (:data:`NAMES`), and words in strings (:data:`STRINGS`).

    python scripts/async_to_sync.py           # write the sync module
    python scripts/async_to_sync.py --check   # exit 1 if it differs from what it would write

tests/sqla/test_generated.py runs the check, so a change to one side only fails the tests.
"""

from __future__ import annotations

import argparse
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "pgsteady" / "_sqla_async.py"
TARGET = ROOT / "src" / "pgsteady" / "_sqla_sync.py"

NAMES = {
    "AsyncSteady": "Steady", "AsyncEngine": "Engine", "AsyncSession": "Session",
    "AsyncConnection": "Connection", "ARun": "Run", "AWork": "Work",
    "async_engine_of": "sync_engine_of", "async_sessions": "sync_sessions",
    "aclose": "close", "__aenter__": "__enter__", "__aexit__": "__exit__", "aguard": "guard",
    "wait_for_outcome": "wait_for_outcome_in_thread",
}
STRINGS = {"``await fn(session)``": "``fn(session)``", "AsyncSteady": "Steady",
           "AsyncEngine": "Engine"}
MARKER = "if True:  # ASYNC"
DOCSTRING = '''"""``Steady``: :class:`~pgsteady._sqla_async.AsyncSteady` for a sync ``Engine``, on
worker threads (see :mod:`pgsteady.sqlalchemy`).

GENERATED from ``_sqla_async.py`` by ``scripts/async_to_sync.py``: do not edit; edit the
async source and run the script.
"""'''


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _block(lines: list[str], start: int, indent: int) -> int:
    """The end of the block starting at ``start`` (lines indented deeper than ``indent``),
    trailing blank lines left outside."""
    end = start
    for i in range(start, len(lines)):
        if lines[i].strip() and _indent(lines[i]) <= indent:
            break
        if lines[i].strip():
            end = i + 1
    return end


def branches(lines: list[str]) -> list[str]:
    """Resolve ``if True:  # ASYNC`` blocks (nested ones too) and ``# async only`` lines."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("# async only"):
            i += 1
            continue
        if line.strip() != MARKER:
            out.append(line)
            i += 1
            continue
        indent = _indent(line)
        i = _block(lines, i + 1, indent)
        if i < len(lines) and lines[i].strip() == "else:" and _indent(lines[i]) == indent:
            end = _block(lines, i + 1, indent)
            out.extend(branches([body[4:] if body.strip() else body
                                 for body in lines[i + 1:end]]))
            i = end
    return out


def _replace(text: str, edits: list[tuple[tuple[int, int], tuple[int, int], str]]) -> str:
    lines = text.splitlines(keepends=True)
    for (row, col), (end_row, end_col), new in sorted(edits, reverse=True):
        first, last = lines[row - 1], lines[end_row - 1]
        lines[row - 1:end_row] = [first[:col] + new + last[end_col:]]
    return "".join(lines)


def tokens(text: str) -> str:
    """Drop ``async``/``await``, map names and words in strings."""
    toks = [tok for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type not in (tokenize.NL, tokenize.COMMENT)]
    edits = []
    first_string = True
    for tok, after in zip(toks, [*toks[1:], toks[-1]], strict=True):
        if tok.type == tokenize.NAME and (
                tok.string == "await"
                or (tok.string == "async" and after.string in ("def", "with", "for"))):
            edits.append((tok.start, after.start, ""))
        elif tok.type == tokenize.NAME and tok.string in NAMES:
            edits.append((tok.start, tok.end, NAMES[tok.string]))
        elif tok.type == tokenize.STRING:
            new = tok.string
            for old, word in STRINGS.items():
                new = new.replace(old, word)
            new = DOCSTRING if first_string else new
            if new != tok.string:
                edits.append((tok.start, tok.end, new))
            first_string = False
    return _replace(text, edits)


def generate(source: str) -> str:
    return tokens("".join(branches(source.splitlines(keepends=True))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the sync module differs from what would be written")
    args = parser.parse_args(argv)
    made = generate(SOURCE.read_text(encoding="utf-8"))
    if args.check:
        if TARGET.read_text(encoding="utf-8") != made:
            print(f"{TARGET.relative_to(ROOT)} is out of date: run scripts/async_to_sync.py",
                  file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(made, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
