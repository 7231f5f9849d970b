"""What a statement runs and writes, and what a function's definition locks, from text alone
(issue 39: the oracle read a writable CTE as a read and never looked inside a function)."""

from __future__ import annotations

import pytest

from pgsteady.sql.analysis import LockMode, analyze
from pgsteady.sql.bodies import definition, read_definition


def _one(sql):
    [statement] = analyze(sql)
    return statement


@pytest.mark.parametrize(("sql", "writes"), [
    ("INSERT INTO a VALUES (1)", [("a", {"INSERT"})]),
    ("INSERT INTO a VALUES (1) ON CONFLICT (id) DO UPDATE SET n = 1", [("a", {"INSERT",
                                                                              "UPDATE"})]),
    ("INSERT INTO a VALUES (1) ON CONFLICT DO NOTHING", [("a", {"INSERT"})]),
    ("WITH d AS (DELETE FROM a RETURNING *) INSERT INTO b SELECT * FROM d",
     [("b", {"INSERT"}), ("a", {"DELETE"})]),
    ("WITH u AS (UPDATE a SET n = 1 RETURNING id) SELECT * FROM u", [("a", {"UPDATE"})]),
    ("COPY a FROM '/dev/null'", [("a", {"INSERT"})]),
    ("TRUNCATE a, b", [("a", {"TRUNCATE"}), ("b", {"TRUNCATE"})]),
    ("EXPLAIN ANALYZE DELETE FROM a", [("a", {"DELETE"})]),
    ("EXPLAIN DELETE FROM a", []),
    ("SELECT * FROM a", []),
    ("CREATE RULE r AS ON INSERT TO a DO ALSO INSERT INTO b VALUES (1)", []),
])
def test_writes_are_the_data_changes_that_run(sql, writes):
    """Each table whose triggers a statement fires, with the events: WITH's data changes and
    ON CONFLICT DO UPDATE included; a rule's actions (stored, not run) and EXPLAIN without
    ANALYZE not."""
    assert [(w.name, set(w.events)) for w in _one(sql).writes] == writes


def test_a_writable_cte_takes_row_exclusive():
    """WITH d AS (DELETE FROM a ...) locks a ROW EXCLUSIVE, in an INSERT or in a SELECT."""
    for sql in ("WITH d AS (DELETE FROM a RETURNING *) INSERT INTO b SELECT * FROM d",
                "WITH d AS (DELETE FROM a RETURNING *) SELECT count(*) FROM d",
                "WITH d AS (UPDATE a SET n = 1 RETURNING *) SELECT * FROM d FOR UPDATE"):
        locks = {t.lock for t in _one(sql).targets if t.name == "a" and t.reach == "self"}
        assert locks == {LockMode.ROW_EXCLUSIVE}, sql


@pytest.mark.parametrize(("sql", "calls"), [
    ("SELECT backfill()", ["backfill"]),
    ("SELECT s.f(1), g(f(2))", ["s.f", "g", "f"]),
    ("CALL prune(1)", ["prune"]),
    ("UPDATE t SET n = f(n) WHERE extract(day FROM now()) > 1 AND substring(x FROM 2) = 'a'",
     ["f", "now"]),
    ("CREATE VIEW v AS SELECT f(1)", []),
    ("CREATE FUNCTION h() RETURNS int LANGUAGE sql AS 'SELECT f(1)'", []),
])
def test_calls_are_the_functions_that_run(sql, calls):
    """Functions called as written; the grammar's own (EXTRACT, SUBSTRING ... FROM) are left
    out, as are the expressions a view or a function only stores."""
    assert list(_one(sql).calls) == calls


def test_a_plpgsql_definition_is_read_with_its_calls():
    """A PL/pgSQL body's statements (a static ALTER, a literal EXECUTE), placed at the calling
    line, each keeping the functions it calls; a computed EXECUTE is a reason, named."""
    made = definition("""CREATE FUNCTION public.backfill(k int) RETURNS void LANGUAGE plpgsql
        AS $$ BEGIN
          ALTER TABLE a ADD COLUMN c int;
          EXECUTE format('TRUNCATE %I', 'b');
          PERFORM g(k);
          EXECUTE 'DROP TABLE ' || k;
        END $$""")
    assert made is not None and made.name == "public.backfill" and made.language == "plpgsql"
    reading = read_definition(made, 7, 0)
    kinds = [(s.line, s.kind) for s in reading.statements]
    assert (7, "ALTER TABLE ... ADD COLUMN in public.backfill()") in kinds
    assert (7, "TRUNCATE in public.backfill()") in kinds
    assert ["g"] in [list(s.calls) for s in reading.statements]
    [(line, why)] = reading.unknown
    assert line == 7 and why.startswith("public.backfill() EXECUTE of a string computed")


@pytest.mark.parametrize("sql", [
    "CREATE FUNCTION f() RETURNS bigint LANGUAGE sql AS 'DELETE FROM a; SELECT count(*) FROM b'",
    "CREATE FUNCTION f() RETURNS bigint LANGUAGE sql BEGIN ATOMIC DELETE FROM a; "
    "SELECT count(*) FROM b; END",
])
def test_a_sql_definition_is_read(sql):
    """A SQL body, as a string or BEGIN ATOMIC: each statement's locks."""
    reading = read_definition(definition(sql), 3, 0)
    locks = {(t.name, t.lock) for s in reading.statements for t in s.targets if t.reach == "self"}
    assert locks == {("a", LockMode.ROW_EXCLUSIVE), ("b", LockMode.ACCESS_SHARE)}
    assert reading.unknown == []


def test_another_language_is_unknown():
    """A body in a language other than SQL or PL/pgSQL is a reason, not "locks nothing"."""
    made = definition("CREATE FUNCTION f() RETURNS int LANGUAGE plpython3u AS 'return 1'")
    reading = read_definition(made, 2, 0)
    assert reading.statements == []
    assert reading.unknown == [(2, "f() is in language plpython3u: preflight reads SQL and "
                                   "PL/pgSQL bodies only")]
