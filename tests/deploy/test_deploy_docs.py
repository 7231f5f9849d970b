"""docs/deploying.md shows only files the deploy tests run: each of its code blocks is a
snippet include of a file in tests/deploy/apps/, and each such file is used by a test."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import APPS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "deploying.md"
INCLUDE = re.compile(r'^--8<-- "([^"]+)"$')


def _blocks(text: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    inside: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            if inside is None:
                inside = []
            else:
                blocks.append(inside)
                inside = None
        elif inside is not None:
            inside.append(line)
    return blocks


def test_every_block_on_the_deploying_page_is_a_file_the_tests_run():
    """No configuration is written inline on the page: every code block includes one file
    from tests/deploy/apps/, and every included file is named by a deploy test (or is a
    config another included file builds on)."""
    blocks = _blocks(PAGE.read_text())
    assert len(blocks) >= 7
    included = []
    for block in blocks:
        assert len(block) == 1 and INCLUDE.match(block[0]), block
        path = ROOT / INCLUDE.match(block[0])[1]  # type: ignore[index]
        assert path.is_file() and APPS in path.parents, path
        included.append(path)
    tests = "".join(p.read_text() for p in Path(__file__).parent.glob("*.py")) + "".join(
        p.read_text() for p in APPS.glob("*.py"))
    for path in included:
        name = path.name if path.suffix != ".py" else path.stem
        assert f'"{name}' in tests or f"{name}:" in tests or f'"{path.name}"' in tests, path
    apps = {p for p in APPS.rglob("*") if p.suffix in (".py", ".yaml") and
            p.name != "master_watch.py"}
    assert apps <= set(included), apps - set(included)
