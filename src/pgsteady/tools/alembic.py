"""Alembic: its history, ``alembic_version`` (one row per head), which pgsteady reads but never
writes (``pgsteady.migrate.alembic`` runs Alembic itself); and ``alembic upgrade --sql``
output, which writes its own ``BEGIN`` / ``COMMIT``: lint's ``alembic-sql`` profile."""

from __future__ import annotations

import re
from pathlib import Path

from pgsteady.tools._base import Tool, UpPart

WRITES_VERSION = re.compile(r"\balembic_version\b")


class Alembic(Tool):
    """The history Alembic keeps (migrate reads it; a folder of Alembic revisions is Python)."""

    name = "alembic"
    display = "Alembic"
    migrates = False
    writes_history = False
    history_table = "alembic_version"
    history_order = "version_num"
    history_columns = frozenset({"version_num"})


class AlembicSql(Tool):
    """``alembic upgrade --sql`` output, as lint judges it: no transaction added."""

    name = "alembic-sql"
    display = "alembic upgrade --sql"
    migrates = False

    def up_part(self, path: Path, text: str) -> tuple[UpPart, bool | None]:
        return UpPart(text), False


def writes_version(head: str) -> bool:
    """Whether a script's text writes ``alembic_version`` (``alembic upgrade --sql`` output)."""
    return WRITES_VERSION.search(head) is not None


TOOL = Alembic()
SQL_PROFILE = AlembicSql()
