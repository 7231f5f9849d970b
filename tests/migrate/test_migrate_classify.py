"""Statements whose analysis waits: never one that loading had to check, always the same
analysis in the end, and none of it done when nobody holds a lock."""

from __future__ import annotations

import pytest
from migrate_helpers import FAST, history, write_migrations
from test_lock_oracle import CONCURRENT_FORMS, FORMS, SETUP

from pgsteady.errors import BadMigration
from pgsteady.migrate import apply, source
from pgsteady.migrate.source import Migration
from pgsteady.sql import analysis, classify

MORE = [
    "BEGIN", "COMMIT", "START TRANSACTION", "DO $$ BEGIN PERFORM 1; END $$",
    "VACUUM solo", "CREATE DATABASE x", "DROP INDEX CONCURRENTLY child_body_idx",
    "ALTER TABLE events DETACH PARTITION events_2025 CONCURRENTLY",
    "REINDEX INDEX CONCURRENTLY child_body_idx", "SELECT 'café'; UPDATE solo SET t = 'é'",
    "  -- a comment\n  /* another */ INSERT INTO solo (n) VALUES (1)",
]


@pytest.mark.parametrize("text", [*FORMS, *(f for f, _ in CONCURRENT_FORMS), *MORE,
                                  *[s + ";" for s in SETUP.split(";\n") if s.strip()]])
def test_plain_statements_are_exactly_what_the_analysis_says(text):
    """Whatever the cheap look calls plain, the full analysis says runs in a transaction and
    is not transaction control; its text and place are the analysis' own."""
    plain = classify.plain_statements(text)
    if plain is None:
        return
    full = analysis.analyze(text)
    assert [(p.sql, p.line, p.col) for p in plain] == [(s.sql, s.line, s.col) for s in full]
    for statement in full:
        assert statement.transactional, statement.kind
        assert not statement.kind.startswith("TRANSACTION"), statement.kind
        assert "CONCURRENTLY" not in statement.kind


def test_most_of_the_catalogue_is_plain():
    """The common DDL and DML forms take the cheap path (else it saves nothing)."""
    plain = [f for f in FORMS if classify.plain_statements(f) is not None]
    assert len(plain) > len(FORMS) / 2


def test_lazy_statements_equal_eager_ones(tmp_path):
    """A folder's statements analysed on first use equal analysing each file whole."""
    folder = write_migrations(tmp_path / "m", {
        f"{n + 1:04d}_f.sql": ";\n  ".join(FORMS[n * 10:(n + 1) * 10]) + ";\n"
        for n in range(len(FORMS) // 10)})
    for migration in source.load_dir(folder):
        assert all(isinstance(p, source.Part) for p in migration.parts)
        whole = analysis.analyze(migration.sql)
        assert [(s.sql, s.line, s.col, s.kind, s.targets) for s in migration.statements] == \
            [(s.sql, s.line, s.col, s.kind, s.targets) for s in whole]


def test_loading_still_refuses_what_it_must(tmp_path):
    """Transaction control and a concurrent build in a transactional file are refused at
    load, with their line, though plain statements around them are not analysed."""
    folder = write_migrations(tmp_path / "a", {
        "0001_a.sql": "CREATE TABLE a (id int);\nCOMMIT;\n"})
    with pytest.raises(BadMigration, match=r"0001_a.sql:2: COMMIT is not allowed"):
        source.load_dir(folder)
    folder = write_migrations(tmp_path / "b", {
        "0001_b.sql": "CREATE TABLE b (id int);\nCREATE INDEX CONCURRENTLY b_i ON b (id);\n"})
    with pytest.raises(BadMigration, match=r"0001_b.sql:2: CREATE INDEX CONCURRENTLY cannot "
                                           r"run inside a transaction"):
        source.load_dir(folder)


def test_no_analysis_when_nobody_holds_a_lock(tmp_path, db):
    """On a database nobody else is using, migrate applies plain migrations without
    analysing a single statement (the preflight has nobody to look for)."""
    folder = write_migrations(tmp_path / "m", {
        "0001_t.sql": "CREATE TABLE t (id int);\n",
        "0002_c.sql": "ALTER TABLE t ADD COLUMN c int;\nCOMMENT ON TABLE t IS 'x';\n"})
    migrations = source.load_dir(folder)
    apply.migrate(db, migrations, FAST)
    assert history(db) == [1, 2]
    assert all("statements" not in vars(m) for m in migrations)  # never computed
    assert isinstance(migrations[0], Migration)


def test_a_plain_folder_applies_without_pglast_trees(tmp_path, db):
    """Loading and applying plain migrations on a quiet database never runs pglast's AST and
    enums modules (their import is most of what the analysis would cost a small run)."""
    import subprocess
    import sys

    folder = write_migrations(tmp_path / "m", {
        "0001_t.sql": "-- a table\nCREATE TABLE t (id int);\n\n",
        "0002_c.sql": "ALTER TABLE t ADD COLUMN c int;\nCOMMENT ON TABLE t IS 'x';\n"})
    code = ("import sys\nfrom pgsteady.migrate import apply, source\n"
            f"apply.migrate({db!r}, source.load_dir({str(folder)!r}))\n"
            "print(sorted(type(sys.modules[m]).__name__ for m in ('pglast.ast', 'pglast.enums')"
            " if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "['_Deferred', '_Deferred']", done.stdout + done.stderr
    assert history(db) == [1, 2]


def test_a_nested_block_comment_before_a_statement_is_skipped_whole():
    """PostgreSQL nests /* */ comments: the statement's position is its first word after the
    outer comment closes, in the full analysis and in the cheap look alike."""
    from pgsteady.sql.analysis import analyze
    from pgsteady.sql.classify import plain_statements

    sql = "SELECT 1;\n/* outer /* inner */ still outer */\n  CREATE TABLE t (id int);\n"
    [_, create] = analyze(sql)
    assert (create.line, create.col) == (3, 3)
    assert create.sql.startswith("CREATE TABLE")
    plain = plain_statements(sql)
    assert plain is not None
    assert [(p.line, p.col) for p in plain][-1] == (3, 3)
