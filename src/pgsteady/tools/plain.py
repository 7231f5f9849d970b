"""Plain SQL files run by ``psql -f``: no transaction (each statement commits on its own) and
no timeouts set. ``pgsteady lint``'s fallback profile."""

from __future__ import annotations

from pathlib import Path

from pgsteady.tools._base import Tool, UpPart


class Plain(Tool):
    name = "plain"
    display = "psql"
    migrates = False

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        return UpPart(text), False


TOOL = Plain()
