"""The ok/bad SQL cases under ``cases/<rule-id>/``, and the settings a case may ask for.

A case's first line may set configuration for it:
``-- pgsteady-test: assume_runner_timeouts=false pg_version=10``; ``runner=prisma`` lints it as
that tool runs it (one multi-statement query: an implicit transaction). Lines above a line
``-- pgsteady-test: above ran in an earlier migration`` are history: replayed into the schema
model (so the case can show a column's old type or a table that already exists), not linted.
"""

from __future__ import annotations

from pathlib import Path

from pgsteady.lint import runners
from pgsteady.lint.config import LintConfig
from pgsteady.lint.engine import FileReport, Linter, Unit

CASES = Path(__file__).parent / "cases"
DIRECTIVE = "-- pgsteady-test:"
HISTORY_END = "-- pgsteady-test: above ran in an earlier migration"


def all_cases() -> list[Path]:
    return sorted(CASES.glob("*/*.sql"))


def config_for(sql: str) -> LintConfig:
    config = LintConfig()
    first = sql.splitlines()[0] if sql else ""
    if first.startswith(DIRECTIVE) and not first.startswith(HISTORY_END):
        for setting in first.removeprefix(DIRECTIVE).split():
            key, _, value = setting.partition("=")
            parsed: object = {"true": True, "false": False}.get(value, value)
            if key == "pg_version":
                parsed = int(value)
            config = config.replace(**{key: parsed})
    return config


def split_history(sql: str) -> tuple[str, str]:
    """(history, the part to lint padded with blank lines so line numbers stay the file's)."""
    if HISTORY_END not in sql:
        return "", sql
    history, _, rest = sql.partition(HISTORY_END)
    return history, "\n" * history.count("\n") + rest


def lint_case(sql: str, path: str = "<case>") -> FileReport:
    """Lint a case as a migration after its history, with the settings it asks for."""
    history, body = split_history(sql)
    config = config_for(sql)
    linter = Linter(config)
    unit = Unit(path, body)
    if config.runner != "auto":
        unit = runners.unit(Path(path), body, config.runner)
    if not history:
        return linter.lint_text(unit.text, path, in_transaction=unit.in_transaction,
                                runner_timeouts=unit.runner_timeouts)
    return linter.lint_units([unit], history=[Unit("history", history)]).files[0]
