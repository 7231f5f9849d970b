"""The record base lint's data classes share instead of dataclasses (start-up time)."""

from __future__ import annotations

import pickle

import pytest

from pgsteady.lint.base import Hit
from pgsteady.lint.config import LintConfig
from pgsteady.lint.report import FileReport, Finding
from pgsteady.lint.schema import ColumnType, Schema, Table


def test_equality_hash_and_repr_follow_the_compared_fields():
    """Records equal field by field; fields left uncompared (a Hit's command node, where a
    config came from) change neither equality nor hash; mutable records do not hash."""
    assert Hit("x", 3) == Hit("x", 3) and hash(Hit("x", 3)) == hash(Hit("x", 3))
    assert Hit("x", 3, command={"a": 1}) == Hit("x", 3)
    assert Hit("x", 3) != Hit("x", 4) and Hit("x") != "x"
    assert LintConfig(source="a.toml") == LintConfig(source="b.toml")
    assert ColumnType("varchar", (36,)) in {ColumnType("varchar", (36,))}
    assert str(ColumnType("varchar", (36,), array=True)) == "varchar(36)[]"
    with pytest.raises(TypeError):
        hash(FileReport("a.sql"))
    assert "detail='x'" in repr(Hit("x")) and "command" not in repr(Hit("x"))


def test_replace_copies_and_refuses_unknown_fields():
    """``replace`` changes only what it is given, for records whose ``__init__`` takes every
    field and for those that build some themselves (a schema)."""
    finding = Finding("a.sql", 1, 2, "rule", "message", "help")
    moved = finding.replace(line=7, table="t")
    assert (moved.line, moved.table, moved.col, finding.line) == (7, "t", 2, 1)
    schema = Schema(file_serial=3)
    schema.tables[("public", "t")] = Table(created_in=1)
    copy = schema.replace(change_start=2)
    assert (copy.file_serial, copy.change_start, copy.tables) == (3, 2, schema.tables)
    with pytest.raises(TypeError, match="no field colour"):
        finding.replace(colour="red")


def test_records_survive_pickling_and_do_not_share_defaults():
    """Reports and the schema pickle (for callers sending them between processes; the lint
    cache stores JSON); default lists and dicts are per instance."""
    report = FileReport("a.sql", [Finding("a.sql", 1, 1, "r", "m", "h")], statements=2)
    assert pickle.loads(pickle.dumps(report)) == report  # noqa: S301 -- our own bytes
    schema = Schema()
    schema.tables[("public", "t")] = Table({"id": ColumnType("int8")})
    assert pickle.loads(pickle.dumps(schema)) == schema  # noqa: S301 -- our own bytes
    first, second = FileReport("a.sql"), FileReport("b.sql")
    first.findings.append(report.findings[0])
    assert second.findings == [] and Schema().tables == {}
