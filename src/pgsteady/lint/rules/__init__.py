"""The rules, one module each; every module in this folder is a rule and is found on import.

A rule module defines ``ID`` (stable, kebab-case), ``MESSAGE``, ``HELP`` (what to do instead,
with the safe SQL), ``MIN_PG_VERSION`` (None when it matters on every version), a docstring
(the problem and the safe alternative), and one of two checks:

- a statement rule: ``STATEMENTS`` (the statement node types it looks at;
  ``"AlterTableStmt.AT_AddColumn"`` narrows an ALTER TABLE to the subcommands it cares about,
  so the rule is not even called for the others) and ``check(kind, stmt, ctx)``;
- a command rule: ``COMMANDS`` (ALTER TABLE subcommand types, ``("AT_SetNotNull",)``) and
  ``check(subtype, cmd, ctx)``, handed each such subcommand of an ALTER TABLE on a table that
  existed before the change (``NEW_TABLES = True``: on new ones too), ``ctx.relation`` its
  table.

Either yields :class:`~pgsteady.lint.base.Hit`. ``MIN_PG_VERSION`` is the major the statement
itself needs (before it there is nothing to say); a rule whose *fix* needs a newer major sets
``FEATURE`` (that major, from :mod:`pgsteady._majors`) and ``HELP_BEFORE`` (the fix before
it): it still speaks there, since a version gate changes the advice and never hides a lock.
Optional: ``finish(ctx)`` for end-of-file checks, ``SIZE_AWARE = True`` when the cost grows
with the table, ``DEFAULT_ENABLED = False`` for opt-in rules, ``SEVERITY = "warning"`` for
notes that should not fail a build.
"""
from __future__ import annotations

import importlib
import os
from functools import cache
from pathlib import Path
from types import ModuleType

from pgsteady.lint.base import Rule, per_command

REQUIRED = ("ID", "MESSAGE", "HELP", "MIN_PG_VERSION", "check")


class IncompleteRule(Exception):
    """A rule module misses something every rule must have (a bug, caught by the meta-test)."""


def rule_ids() -> frozenset[str]:
    """Every rule's id, from the module names alone (no import: a warm cache run checks the
    configuration's rule ids with this)."""
    folder = Path(__file__).parent
    return frozenset(name[:-3].replace("_", "-") for name in os.listdir(folder)
                     if name.endswith(".py") and not name.startswith("_"))


def rule_modules() -> list[ModuleType]:
    """Every module in this package, imported, sorted by name."""
    names = sorted(name[:-3] for name in os.listdir(Path(__file__).parent)
                   if name.endswith(".py") and not name.startswith("_"))
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


def from_module(module: ModuleType) -> Rule:
    """Check a rule module has everything and flatten it into a :class:`Rule`."""
    missing = [name for name in REQUIRED if not hasattr(module, name)]
    if hasattr(module, "STATEMENTS") == hasattr(module, "COMMANDS"):
        missing.append("STATEMENTS or COMMANDS (one of them)")
    if not (module.__doc__ or "").strip():
        missing.append("docstring")
    if missing:
        raise IncompleteRule(f"{module.__name__} lacks {', '.join(missing)}")
    feature = getattr(module, "FEATURE", None)
    if feature is not None and not getattr(module, "HELP_BEFORE", ""):
        raise IncompleteRule(f"{module.__name__} has FEATURE but lacks HELP_BEFORE")
    check, statements = module.check, tuple(getattr(module, "STATEMENTS", ()))
    if hasattr(module, "COMMANDS"):
        commands = tuple(module.COMMANDS)
        check = per_command(check, commands, new_tables=bool(getattr(module, "NEW_TABLES", False)))
        statements = tuple(f"AlterTableStmt.{subtype}" for subtype in commands)
    return Rule(
        id=module.ID, message=module.MESSAGE, help=module.HELP,
        min_pg_version=module.MIN_PG_VERSION, doc=module.__doc__ or "",
        statements=statements, check=check,
        finish=getattr(module, "finish", None),
        size_aware=bool(getattr(module, "SIZE_AWARE", False)),
        default_enabled=bool(getattr(module, "DEFAULT_ENABLED", True)),
        module=module.__name__,
        severity="warning" if getattr(module, "SEVERITY", "error") == "warning" else "error",
        feature=feature, help_before=getattr(module, "HELP_BEFORE", ""),
    )


@cache
def all_rules() -> dict[str, Rule]:
    """Every rule by id."""
    rules = [from_module(m) for m in rule_modules()]
    return {rule.id: rule for rule in sorted(rules, key=lambda r: r.id)}
