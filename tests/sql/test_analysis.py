"""Statement analysis: which relations a statement locks, in which mode, and where it is."""

from __future__ import annotations

import pytest

from pgsteady.sql.analysis import LockMode, Reach, SqlSyntaxError, Target, analyze


def test_conflict_table_matches_postgres():
    """The conflict table is PostgreSQL's: symmetric, with the documented pairs."""
    for a in LockMode:
        for b in LockMode:
            assert a.conflicts_with(b) == b.conflicts_with(a)
    assert LockMode.ACCESS_SHARE.conflicts_with(LockMode.ACCESS_EXCLUSIVE)
    assert not LockMode.ACCESS_SHARE.conflicts_with(LockMode.EXCLUSIVE)
    assert not LockMode.SHARE_UPDATE_EXCLUSIVE.conflicts_with(LockMode.ROW_EXCLUSIVE)
    assert LockMode.SHARE_UPDATE_EXCLUSIVE.conflicts_with(LockMode.SHARE_UPDATE_EXCLUSIVE)
    assert not LockMode.SHARE.conflicts_with(LockMode.SHARE)
    assert LockMode.SHARE.conflicts_with(LockMode.ROW_EXCLUSIVE)
    assert LockMode.from_pg_name("ShareRowExclusiveLock") is LockMode.SHARE_ROW_EXCLUSIVE


@pytest.mark.parametrize(("sql", "kind", "targets", "transactional"), [
    ("ALTER TABLE orgs ADD COLUMN flag boolean", "ALTER TABLE ... ADD COLUMN",
     [Target(None, "orgs", LockMode.ACCESS_EXCLUSIVE)], True),
    ("CREATE INDEX CONCURRENTLY i ON app.orgs (name)", "CREATE INDEX CONCURRENTLY",
     [Target("app", "orgs", LockMode.SHARE_UPDATE_EXCLUSIVE)], False),
    ("CREATE INDEX i ON orgs (name)", "CREATE INDEX", [Target(None, "orgs", LockMode.SHARE)],
     True),
    ("ALTER TABLE a ADD CONSTRAINT f FOREIGN KEY (b) REFERENCES b (id) NOT VALID",
     "ALTER TABLE ... ADD FOREIGN KEY",
     [Target(None, "a", LockMode.SHARE_ROW_EXCLUSIVE),
      Target(None, "b", LockMode.SHARE_ROW_EXCLUSIVE)], True),
    ("ALTER TABLE a VALIDATE CONSTRAINT f", "ALTER TABLE ... VALIDATE CONSTRAINT",
     [Target(None, "a", LockMode.SHARE_UPDATE_EXCLUSIVE)], True),
    ("DROP INDEX CONCURRENTLY i", "DROP INDEX CONCURRENTLY",
     [Target(None, "i", LockMode.SHARE_UPDATE_EXCLUSIVE)], False),
    ("LOCK TABLE t IN SHARE ROW EXCLUSIVE MODE", "LOCK TABLE IN SHARE ROW EXCLUSIVE MODE",
     [Target(None, "t", LockMode.SHARE_ROW_EXCLUSIVE)], True),
    ("VACUUM t", "VACUUM", [Target(None, "t", LockMode.SHARE_UPDATE_EXCLUSIVE)], False),
    ("UPDATE t SET a = 1", "UPDATE", [Target(None, "t", LockMode.ROW_EXCLUSIVE)], True),
    ("CREATE TABLE n (id int)", "CREATE TABLE", [], True),
])
def test_statement_locks(sql, kind, targets, transactional):
    """Each statement gets its documented lock level on the relations it names."""
    [info] = analyze(sql)
    assert info.kind == kind
    assert [t for t in info.targets if t.reach == Reach.SELF] == targets
    assert info.transactional is transactional


@pytest.mark.parametrize(("sql", "reach", "only"), [
    ("ALTER TABLE child DROP CONSTRAINT child_parent_fkey", Reach.REFERENCED,
     "constraint:child_parent_fkey"),
    ("ALTER TABLE child DROP COLUMN parent_id", Reach.REFERENCED, "column:parent_id"),
    ("DROP TABLE child", Reach.REFERENCED, None),
])
def test_foreign_keys_reach_the_other_table(sql, reach, only):
    """Dropping a foreign key, its column or its table locks the referenced table too."""
    [info] = analyze(sql)
    assert Target(None, "child", LockMode.ACCESS_EXCLUSIVE, reach, only) in info.targets


@pytest.mark.parametrize(("sql", "kind"), [
    ("CREATE VIEW v AS SELECT 1", "CREATE VIEW"),
    ("CREATE OR REPLACE VIEW v AS SELECT 1", "CREATE OR REPLACE VIEW"),
    ("CREATE TABLE t2 AS SELECT 1", "CREATE TABLE AS"),
    ("CREATE MATERIALIZED VIEW m AS SELECT 1", "CREATE MATERIALIZED VIEW"),
    ("COMMENT ON TABLE t IS 'x'", "COMMENT ON TABLE"),
    ("DROP TRIGGER trg ON t", "DROP TRIGGER"),
    ("CREATE DOMAIN d AS int", "CREATE DOMAIN"),
    ("CREATE TYPE e AS ENUM ('a')", "CREATE TYPE ... AS ENUM"),
    ("CREATE EXTENSION hstore", "CREATE EXTENSION"),
    ("ALTER TABLE t SET (fillfactor = 70)", "ALTER TABLE ... SET (...)"),
])
def test_kinds_are_plain_sql_words(sql, kind):
    """Statement kinds read as SQL, never as parser node names (CreateTableAs, View)."""
    [info] = analyze(sql)
    assert info.kind == kind


def test_positions_skip_comments_and_blank_lines():
    """A statement's line and column point at its first word, past comments."""
    text = "-- header\n\n  /* note */ SELECT 1;\nALTER TABLE t\n  ADD COLUMN c int;\n"
    first, second = analyze(text)
    assert (first.line, first.col, first.sql) == (3, 14, "SELECT 1")
    assert (second.line, second.col) == (4, 1)
    assert second.sql == "ALTER TABLE t\n  ADD COLUMN c int"


def test_syntax_error_has_line_and_column():
    """A parse error names the line and column of the bad token."""
    with pytest.raises(SqlSyntaxError) as err:
        analyze("SELECT 1;\nALTER TABLE t ADD COLUMN;\n")
    assert (err.value.line, err.value.col) == (2, 25)
    assert "syntax error" in str(err.value)


def test_reindex_table_conflicts_like_access_exclusive():
    """REINDEX TABLE locks every index ACCESS EXCLUSIVE: readers of the table block it."""
    from pgsteady.sql.analysis import LockMode, analyze

    (info,) = analyze("REINDEX TABLE orgs")
    assert info.targets[0].name == "orgs"
    assert info.targets[0].lock is LockMode.ACCESS_EXCLUSIVE


def test_every_statement_type_is_accounted_for():
    """Each statement pglast parses has lock rules, takes no relation lock, or is opaque."""
    from pglast import ast

    from pgsteady.sql import analysis
    from pgsteady.sql.statement_kinds import LOCK_FREE_NODES, OPAQUE_NODES

    handled = {cls.__name__ for cls in analysis._HANDLERS}
    statements = {name for name in dir(ast) if name.endswith("Stmt")}
    assert not statements - handled - LOCK_FREE_NODES - OPAQUE_NODES
    assert not handled & (LOCK_FREE_NODES | OPAQUE_NODES)
