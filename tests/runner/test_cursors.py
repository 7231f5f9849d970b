"""One-statement calls reuse their connection's cursor (``pgsteady._cursors``), and only
while what it holds is small: a connection never pins a large result or large parameters
while it idles. Reuse changes no answer."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from pgsteady import _cursors


def _spares(db: Any) -> list[Any]:
    """The spare cursors the executor's connections hold now."""
    adb = getattr(db, "adb", db)
    slots = [slot for slot in getattr(adb, "_slots", [])] + \
        list(getattr(adb, "_idle_holding", [])) + list(getattr(adb, "_idle_empty", []))
    conns = {id(slot.conn): slot.conn for slot in slots if slot.conn is not None}
    return [conn.__dict__.get("_pgsteady_cursor") for conn in conns.values()]


def test_answers_are_the_same_with_a_reused_cursor(make_db, pgsteady_database):
    db = make_db(pgsteady_database.dsn, pool_size=1)
    db.wait(10)
    for i in range(12):  # past psycopg's prepare threshold, alternating statements
        assert db.fetchone("select %s::int, 'a'", (i,), deadline=5) == (i, "a")
        assert db.fetchall("select generate_series(1, %s)", (2,), deadline=5) == [(1,), (2,)]
        assert db.execute("select 1", deadline=5) == 1
    with pytest.raises(psycopg.errors.DivisionByZero):
        db.fetchone("select 1 / 0", deadline=5)
    assert db.fetchone("select 'after'", deadline=5) == ("after",)
    assert db.fetchone("select 1 where false", deadline=5) is None


def test_a_small_result_keeps_the_cursor_and_a_large_one_lets_it_go(make_db,
                                                                    pgsteady_database):
    db = make_db(pgsteady_database.dsn, pool_size=1)
    db.wait(10)
    db.fetchone("select 1", deadline=5)
    kept = [cur for cur in _spares(db) if cur is not None]
    assert len(kept) == 1 and kept[0].pgresult.ntuples == 1
    big = _cursors.KEEP_BYTES + 1
    assert len(db.fetchone("select repeat('x', %s)", (big,), deadline=5)[0]) == big
    assert _spares(db) == [None]  # one wide row: not kept
    db.fetchone("select 1", deadline=5)
    assert db.fetchall("select generate_series(1, 3)", deadline=5) == [(1,), (2,), (3,)]
    assert _spares(db) == [None]  # three rows: not kept
    db.fetchone("select length(%s)", ("y" * big,), deadline=5)
    assert _spares(db) == [None]  # a large parameter: not kept


def test_small_parameters_are_measured_and_others_are_not_kept():
    assert _cursors._small((1, 2.5, True, None, "abc", b"xy"))
    assert _cursors._small({"a": 1, "b": "x" * 100})
    assert not _cursors._small(("x" * (_cursors.KEEP_BYTES + 1),))
    assert not _cursors._small(([1, 2, 3],))  # a list: not worth measuring
