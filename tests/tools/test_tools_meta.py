"""Every tool in the registry is whole: a module of its own with a docstring, a name matching
its registry key, and, for a layout migrate runs, its history table and statements; lint and
migrate read the same objects."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from pgsteady.tools import registry


@pytest.mark.parametrize("name", sorted(registry.MODULES))
def test_every_tool_is_complete(name):
    """Each registered tool loads from its module, has a docstring and says its own name."""
    module_name, attribute = registry.MODULES[name]
    module = importlib.import_module(f"pgsteady.tools.{module_name}")
    assert module.__doc__ and len(module.__doc__) > 40
    tool = registry.get(name)
    assert tool is getattr(module, attribute) and tool.name == name and tool.display


@pytest.mark.parametrize("name", registry.NAMES)
def test_every_layout_keeps_a_history_as_its_tool_does(name):
    """A layout migrate runs has its history table, the column its rows are read in, the
    table's DDL and a statement recording a migration."""
    tool = registry.get(name)
    assert tool.migrates and tool.history_table and tool.history_order
    assert tool.history_ddl.lstrip().startswith("CREATE TABLE IF NOT EXISTS {}")
    assert "record" in tool.history_dml


def test_lint_profiles_are_the_registry_tools():
    """lint's profiles are the registry's (one definition), and so is migrate's --tool."""
    from pgsteady.cli import lint as cli_lint
    from pgsteady.lint import runners

    assert runners.NAMES == registry.PROFILES
    assert ", ".join(registry.PROFILES) == cli_lint.PROFILES
    assert [n for n in registry.PROFILES if registry.get(n).migrates] == list(registry.NAMES)
    assert [n for n in registry.PROFILES if registry.get(n).sets_timeouts] == ["pgsteady"]


def test_detection_loads_no_driver():
    """Detecting a folder's tool loads every layout module but neither psycopg, pglast nor
    rich (lint's start-up)."""
    code = ("import sys, tempfile; from pgsteady.tools import registry\n"
            "d = tempfile.mkdtemp(); open(d + '/1_a.sql', 'w').write('-- +goose Up\\nSELECT 1;')\n"
            "assert registry.detect(d) == 'goose'\n"
            "print(sorted(m for m in ('psycopg', 'pglast', 'rich') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
