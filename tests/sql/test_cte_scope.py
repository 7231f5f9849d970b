"""A CTE's name is the CTE where a WITH above it defines it, and a table everywhere else: the
lock oracle claims no lock on a CTE (--plan said "ACCESS SHARE on x" for lemmy's
``WITH x AS (INSERT ...) UPDATE ... FROM x``) and still claims a same-named table outside its
scope."""

from __future__ import annotations

import pytest

from pgsteady.sql import analysis


def _locked(sql: str) -> set[str]:
    (info,) = analysis.analyze(sql)
    return {t.name for t in info.targets}


@pytest.mark.parametrize(("sql", "tables"), [
    ("WITH x AS (INSERT INTO person (name) VALUES ('a') RETURNING id) "
     "UPDATE person SET name = 'b' WHERE id IN (SELECT id FROM x)", {"person"}),
    ("WITH d AS (DELETE FROM a RETURNING *) INSERT INTO b SELECT * FROM d", {"a", "b"}),
    ("WITH d AS (SELECT 1) UPDATE t SET v = 1 FROM d, x", {"t", "x"}),
    ("WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
     "SELECT * FROM r", set()),
    ("SELECT * FROM x, (WITH x AS (SELECT 1) SELECT * FROM x) s", {"x"}),  # the table x
    ("WITH x AS (SELECT 1) SELECT * FROM public.x, x", {"x"}),  # qualified: the table
])
def test_a_cte_is_no_table_in_its_scope_only(sql, tables):
    """The names claimed are the tables, never a CTE in scope."""
    assert _locked(sql) == tables
