"""``pgsteady lint``: a migration linter on pglast (rules/ one module each, engine, output).

Names are imported on first use: a warm cache run renders its report without the parser.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing itself costs a lint run's start-up; mypy reads this as True

if TYPE_CHECKING:
    from typing import Any

    from pgsteady.lint.config import LintConfig, load_config
    from pgsteady.lint.engine import Linter, lint_paths
    from pgsteady.lint.report import FileReport, Finding, LintReport, SyntaxProblem
    from pgsteady.lint.rules import all_rules

_SOURCES = {
    "FileReport": "pgsteady.lint.report",
    "Finding": "pgsteady.lint.report",
    "LintConfig": "pgsteady.lint.config",
    "LintReport": "pgsteady.lint.report",
    "Linter": "pgsteady.lint.engine",
    "SyntaxProblem": "pgsteady.lint.report",
    "all_rules": "pgsteady.lint.rules",
    "lint_paths": "pgsteady.lint.engine",
    "load_config": "pgsteady.lint.config",
}

__all__ = [
    "FileReport",
    "Finding",
    "LintConfig",
    "LintReport",
    "Linter",
    "SyntaxProblem",
    "all_rules",
    "lint_paths",
    "load_config",
]


def __getattr__(name: str) -> Any:
    """Import a re-exported name on first use (PEP 562)."""
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
