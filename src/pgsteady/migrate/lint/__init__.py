"""``pgsteady lint``: a migration linter on pglast (rules/ one module each, engine, output)."""

from pgsteady.migrate.lint.config import LintConfig, load_config
from pgsteady.migrate.lint.engine import (
    FileReport,
    Finding,
    Linter,
    LintReport,
    SyntaxProblem,
    lint_paths,
)
from pgsteady.migrate.lint.rules import all_rules

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
