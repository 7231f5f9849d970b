"""Every rule is complete: id, message, help, version, docstring, cases, generated docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _cases import CASES

from pgsteady.lint import docs
from pgsteady.lint.rules import IncompleteRule, all_rules, from_module, rule_modules

MODULES = rule_modules()
DOCS = Path(__file__).parents[2] / "docs" / "rules"
KEBAB = re.compile(r"^[a-z]+(-[a-z]+)*$")


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__.rsplit(".", 1)[-1] for m in MODULES])
def test_rule_module_is_complete(module):
    """A rule module has a kebab-case ID matching its file, MESSAGE, HELP, a version and a docstring."""
    rule = from_module(module)
    assert KEBAB.match(rule.id), rule.id
    assert module.__name__.rsplit(".", 1)[-1] == rule.id.replace("-", "_")
    assert rule.message.strip() and rule.help.strip()
    assert rule.min_pg_version is None or isinstance(rule.min_pg_version, int)
    paragraphs = [p for p in rule.doc.strip().split("\n\n") if p.strip()]
    assert len(paragraphs) >= 2, "docstring: a summary line, then the problem and the safe way"
    assert all(isinstance(kind, str) for kind in rule.statements)


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__.rsplit(".", 1)[-1] for m in MODULES])
def test_rule_has_ok_and_bad_cases(module):
    """Each rule has at least one *_bad.sql and one *_ok.sql case under cases/<rule-id>/."""
    folder = CASES / module.ID
    assert list(folder.glob("*_bad.sql")), f"no bad case in {folder}"
    assert list(folder.glob("*_ok.sql")), f"no ok case in {folder}"


def test_case_folders_name_real_rules():
    """No case folder is left behind for a rule that does not exist."""
    assert {p.name for p in CASES.iterdir() if p.is_dir()} <= set(all_rules())


def test_incomplete_module_is_refused():
    """A module without HELP or a docstring is refused, naming what is missing."""
    import types

    module = types.ModuleType("fake_rule")
    module.ID, module.MESSAGE, module.MIN_PG_VERSION = "fake-rule", "m", None
    module.STATEMENTS, module.check = (), lambda kind, stmt, ctx: ()
    with pytest.raises(IncompleteRule, match="HELP, docstring"):
        from_module(module)


def _fake_rule(**attributes):
    import types

    module = types.ModuleType("fake_rule", "A fake rule.\n\nIts problem and the safe way.")
    module.ID, module.MESSAGE, module.HELP, module.MIN_PG_VERSION = "fake-rule", "m", "h", None
    module.check = lambda kind, stmt, ctx: ()
    for name, value in attributes.items():
        setattr(module, name, value)
    return module


def test_a_version_gated_fix_needs_the_fix_before_it():
    """A rule with FEATURE (its fix needs a newer major) must say the fix before it."""
    with pytest.raises(IncompleteRule, match="HELP_BEFORE"):
        from_module(_fake_rule(STATEMENTS=(), FEATURE=12))
    rule = from_module(_fake_rule(STATEMENTS=(), FEATURE=12, HELP_BEFORE="before"))
    assert (rule.help_for(11), rule.help_for(12)) == ("before", "h")


def test_a_rule_declares_statements_or_commands_not_both():
    """STATEMENTS (a statement rule) or COMMANDS (a command rule), exactly one of them; a
    command rule is dispatched on its ALTER TABLE subcommands."""
    for attributes in ({}, {"STATEMENTS": (), "COMMANDS": ()}):
        with pytest.raises(IncompleteRule, match="STATEMENTS or COMMANDS"):
            from_module(_fake_rule(**attributes))
    rule = from_module(_fake_rule(COMMANDS=("AT_DropColumn",)))
    assert rule.statements == ("AlterTableStmt.AT_DropColumn",)


def test_generated_docs_are_current(tmp_path):
    """docs/rules/ matches what --write-docs generates from the docstrings today."""
    written = docs.write_docs(tmp_path, CASES)
    for path in written:
        committed = DOCS / path.name
        assert committed.exists(), f"regenerate: pgsteady lint --write-docs docs/rules ({path.name})"
        assert committed.read_text() == path.read_text(), f"{path.name} is stale; regenerate"
    assert {p.name for p in DOCS.glob("*.md")} == {p.name for p in written}


def test_explain_prints_rule_documentation():
    """--explain text carries the summary, the safe alternative and the ignore syntax."""
    text = docs.explain("ban-vacuum-full")
    assert text.startswith("ban-vacuum-full: VACUUM FULL rewrites")
    assert "pg_repack" in text
    assert "-- pgsteady: ignore ban-vacuum-full --" in text


def test_pre_commit_hook_is_published():
    """.pre-commit-hooks.yaml declares the pgsteady-lint hook running `pgsteady lint` on SQL."""
    text = (Path(__file__).parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert "- id: pgsteady-lint" in text
    assert "entry: pgsteady lint" in text
    assert "types: [sql]" in text
