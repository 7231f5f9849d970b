"""The ok/bad SQL cases under ``cases/<rule-id>/``, and the settings a case may ask for.

A case's first line may set configuration for it:
``-- pgsteady-test: assume_runner_timeouts=false pg_version=10``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pgsteady.migrate.lint.config import LintConfig

CASES = Path(__file__).parent / "cases"
DIRECTIVE = "-- pgsteady-test:"


def all_cases() -> list[Path]:
    return sorted(CASES.glob("*/*.sql"))


def config_for(sql: str) -> LintConfig:
    config = LintConfig()
    first = sql.splitlines()[0] if sql else ""
    if first.startswith(DIRECTIVE):
        for setting in first.removeprefix(DIRECTIVE).split():
            key, _, value = setting.partition("=")
            parsed: object = {"true": True, "false": False}.get(value, value)
            if key == "pg_version":
                parsed = int(value)
            config = replace(config, **{key: parsed})
    return config
