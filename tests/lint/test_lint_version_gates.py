"""The lint rules whose verdict depends on the PostgreSQL major, proven on real servers of the
majors on both sides of each gate (``scripts/postgres-versions.sh`` installs 10 to 18).

Each test lints the statement for that major and runs it there: the rule speaks exactly
where the server does the harm it warns about (a rewrite seen as a new relfilenode, a scan
seen in ``pg_stat_xact_user_tables``, a lock seen in ``pg_locks``), or where the safe form
its help gives exists. Servers are the session's, one per major.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from pgsteady.lint.config import LintConfig
from pgsteady.lint.engine import Linter

TABLE = ("CREATE TABLE t (id int PRIMARY KEY, n int, a int);"
         "INSERT INTO t SELECT g, g, g FROM generate_series(1, 500) g")


def _rules(sql: str, pg_version: int) -> set[str]:
    """The rules that fire on ``sql`` (the table already exists) when linting for a major."""
    report = Linter(LintConfig(pg_version=pg_version)).lint_text(
        sql, in_transaction=True, runner_timeouts=True)
    assert report.syntax_error is None, report.syntax_error
    return {finding.rule for finding in report.findings}


def _helps(sql: str, pg_version: int) -> dict[str, str]:
    """Each rule that fires on ``sql`` for a major, with the help its finding gives."""
    report = Linter(LintConfig(pg_version=pg_version)).lint_text(
        sql, in_transaction=True, runner_timeouts=True)
    assert report.syntax_error is None, report.syntax_error
    return {finding.rule: finding.help for finding in report.findings}


def _conn(dsn: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(TABLE)
    return conn


def _one(conn: psycopg.Connection[Any], query: str) -> Any:
    row = conn.execute(query).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return row[0]


def _rewrites(conn: psycopg.Connection[Any], statement: str) -> bool:
    """Whether ``statement`` (rolled back) gives table t a new relfilenode: a rewrite."""
    with conn.transaction(force_rollback=True):
        before = _one(conn, "SELECT pg_relation_filenode('t')")
        conn.execute(statement)  # type: ignore[arg-type]
        return bool(_one(conn, "SELECT pg_relation_filenode('t')") != before)


def _scans(conn: psycopg.Connection[Any], statement: str) -> bool:
    """Whether ``statement`` (rolled back) scans table t: this transaction's own counter."""
    query = "SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 't'"
    with conn.transaction(force_rollback=True):
        before = _one(conn, query)
        conn.execute(statement)  # type: ignore[arg-type]
        return bool(_one(conn, query) > before)


def _table_locks(conn: psycopg.Connection[Any], statement: str, table: str) -> set[str]:
    """The modes ``statement`` (rolled back) holds on ``table``, from pg_locks."""
    with conn.transaction(force_rollback=True):
        conn.execute(statement)  # type: ignore[arg-type]
        rows = conn.execute(
            "SELECT mode FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'relation'"
            " AND relation = %s::regclass", [table]).fetchall()
    return {mode for (mode,) in rows}


# -- adding-volatile-default: fast defaults came in 11 -----------------------------------------

CONSTANT_DEFAULT = "ALTER TABLE t ADD COLUMN c int DEFAULT 0"
VOLATILE_DEFAULT = "ALTER TABLE t ADD COLUMN c float8 DEFAULT random()"


@pytest.mark.pg_versions(10, 11)
def test_a_constant_default_is_reported_exactly_where_it_rewrites(pg_version,
                                                                  pgsteady_version_database):
    """ADD COLUMN ... DEFAULT 0 rewrites on 10, not on 11; the rule fires on 10 only."""
    with _conn(pgsteady_version_database.dsn) as conn:
        rewrites = _rewrites(conn, CONSTANT_DEFAULT)
    assert rewrites == (pg_version < 11)
    assert ("adding-volatile-default" in _rules(CONSTANT_DEFAULT, pg_version)) == rewrites


@pytest.mark.pg_versions(10, 11)
def test_a_volatile_default_is_reported_on_both_sides_and_rewrites_on_both(
        pg_version, pgsteady_version_database):
    """ADD COLUMN ... DEFAULT random() rewrites on 10 and 11 alike; the rule fires on both."""
    with _conn(pgsteady_version_database.dsn) as conn:
        assert _rewrites(conn, VOLATILE_DEFAULT)
    assert "adding-volatile-default" in _rules(VOLATILE_DEFAULT, pg_version)


# -- set-not-null-without-check: a validated CHECK skips the scan from 12 ---------------------

PROVEN = ("ALTER TABLE t ADD CONSTRAINT t_n_nn CHECK (n IS NOT NULL) NOT VALID;\n"
          "ALTER TABLE t VALIDATE CONSTRAINT t_n_nn;\n")
SET_NOT_NULL = "ALTER TABLE t ALTER COLUMN n SET NOT NULL"


@pytest.mark.pg_versions(11, 12)
def test_set_not_null_after_a_validated_check_is_reported_exactly_where_it_scans(
        pg_version, pgsteady_version_database):
    """With a validated CHECK, SET NOT NULL scans on 11 and not on 12; lint reports it on 11
    (with a fix 11 has, not the CHECK that did not help) and accepts it on 12."""
    with _conn(pgsteady_version_database.dsn) as conn:
        conn.execute(PROVEN)  # type: ignore[arg-type]
        scans = _scans(conn, SET_NOT_NULL)
    assert scans == (pg_version < 12)
    helps = _helps(PROVEN + SET_NOT_NULL, pg_version)
    assert ("set-not-null-without-check" in helps) == scans
    if scans:
        assert "lock_timeout" in helps["set-not-null-without-check"]
        assert "scans even with a validated CHECK" in helps["set-not-null-without-check"]


@pytest.mark.pg_versions(11, 12)
def test_bare_set_not_null_is_reported_on_both_sides_with_the_fix_that_major_has(
        pg_version, pgsteady_version_database):
    """Bare SET NOT NULL scans under ACCESS EXCLUSIVE on 11 and 12: the rule fires on both;
    its help offers the validated CHECK from 12 only (on 11 the CHECK would not help)."""
    with _conn(pgsteady_version_database.dsn) as conn:
        assert _scans(conn, SET_NOT_NULL)
        assert "AccessExclusiveLock" in _table_locks(conn, SET_NOT_NULL, "t")
    help_ = _helps(SET_NOT_NULL, pg_version)["set-not-null-without-check"]
    assert ("VALIDATE CONSTRAINT" in help_) == (pg_version >= 12)


# -- require-concurrent-reindex and adding-stored-generated-column: both came in 12 -----------

@pytest.mark.pg_versions(11, 12)
def test_plain_reindex_is_reported_where_concurrently_exists(pg_version,
                                                             pgsteady_version_database):
    """Plain REINDEX holds SHARE on the table (writes wait) on 11 and 12: the rule fires on
    both; CONCURRENTLY runs from 12, and the help offers it from 12 only (on 11, a twin index
    built with CREATE INDEX CONCURRENTLY, which 11 runs)."""
    with _conn(pgsteady_version_database.dsn) as conn:
        assert "ShareLock" in _table_locks(conn, "REINDEX TABLE t", "t")
        if pg_version >= 12:
            conn.execute("REINDEX TABLE CONCURRENTLY t")
        else:
            with pytest.raises(psycopg.errors.SyntaxError):
                conn.execute("REINDEX TABLE CONCURRENTLY t")
            conn.execute("CREATE INDEX CONCURRENTLY t_n_twin ON t (n)")
    help_ = _helps("REINDEX TABLE t", pg_version)["require-concurrent-reindex"]
    assert ("REINDEX INDEX CONCURRENTLY" in help_) == (pg_version >= 12)
    assert ("CREATE INDEX CONCURRENTLY" in help_) == (pg_version < 12)


STORED = "ALTER TABLE t ADD COLUMN twice int GENERATED ALWAYS AS (a * 2) STORED"


@pytest.mark.pg_versions(11, 12)
def test_a_stored_generated_column_rewrites_from_12_where_it_exists(pg_version,
                                                                    pgsteady_version_database):
    """11 has no generated columns; 12 rewrites the table to add one; the rule fires from 12."""
    with _conn(pgsteady_version_database.dsn) as conn:
        if pg_version >= 12:
            assert _rewrites(conn, STORED)
        else:
            with pytest.raises(psycopg.errors.SyntaxError):
                conn.execute(STORED)
    assert ("adding-stored-generated-column" in _rules(STORED, pg_version)) == \
        (pg_version >= 12)


VIRTUAL = "ALTER TABLE t ADD COLUMN twice int GENERATED ALWAYS AS (a * 2) VIRTUAL"


@pytest.mark.pg_versions(17, 18)
def test_the_virtual_column_the_help_offers_exists_from_18_and_does_not_rewrite(
        pg_version, pgsteady_version_database):
    """The rule's help (a VIRTUAL column on 18+) holds: 17 refuses it, 18 adds it in place."""
    with _conn(pgsteady_version_database.dsn) as conn:
        if pg_version >= 18:
            assert not _rewrites(conn, VIRTUAL)
        else:
            with pytest.raises(psycopg.errors.SyntaxError):
                conn.execute(VIRTUAL)
    assert "adding-stored-generated-column" not in _rules(VIRTUAL, pg_version)


# -- require-concurrent-detach-partition: CONCURRENTLY came in 14 -----------------------------

PARTITIONS = ("CREATE TABLE ev (id int, at int) PARTITION BY RANGE (at);"
              "CREATE TABLE ev_1 PARTITION OF ev FOR VALUES FROM (0) TO (100);"
              "CREATE TABLE ev_2 PARTITION OF ev FOR VALUES FROM (100) TO (200)")
DETACH = "ALTER TABLE ev DETACH PARTITION ev_1"


@pytest.mark.pg_versions(13, 14)
def test_plain_detach_is_reported_where_concurrently_exists(pg_version,
                                                            pgsteady_version_database):
    """Plain DETACH holds ACCESS EXCLUSIVE on the parent on 13 and 14: the rule fires on
    both; 13 cannot detach CONCURRENTLY, and the help offers it from 14 only."""
    with _conn(pgsteady_version_database.dsn) as conn:
        conn.execute(PARTITIONS)  # type: ignore[arg-type]
        assert "AccessExclusiveLock" in _table_locks(conn, DETACH, "ev")
        if pg_version < 14:
            with pytest.raises(psycopg.errors.SyntaxError):
                conn.execute(DETACH + " CONCURRENTLY")  # type: ignore[arg-type]
    help_ = _helps(DETACH, pg_version)["require-concurrent-detach-partition"]
    assert ("CONCURRENTLY;" in help_) == (pg_version >= 14)
    assert "lock_timeout" in help_ or pg_version >= 14


@pytest.mark.pg_versions(14)
def test_concurrent_detach_lets_new_writes_through_while_it_waits(pg_version,
                                                                  pgsteady_version_database):
    """On 14, DETACH ... CONCURRENTLY waiting for an open reader does not queue new writes,
    which a plain DETACH (ACCESS EXCLUSIVE) would."""
    dsn = pgsteady_version_database.dsn
    with _conn(dsn) as conn, psycopg.connect(dsn) as reader, \
            psycopg.connect(dsn, autocommit=True) as detacher:
        conn.execute(PARTITIONS)  # type: ignore[arg-type]
        reader.execute("SELECT count(*) FROM ev")  # an open transaction that read the parent
        failure: list[BaseException] = []

        def detach() -> None:
            try:
                detacher.execute(DETACH + " CONCURRENTLY")  # type: ignore[arg-type]
            except BaseException as exc:  # reported by the test thread below
                failure.append(exc)

        thread = threading.Thread(target=detach, daemon=True)
        thread.start()
        pid = detacher.info.backend_pid
        deadline = time.monotonic() + 30
        while not _one(conn, f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid} "
                             f"AND wait_event_type = 'Lock'"):
            assert time.monotonic() < deadline, "the detach never waited for the reader"
            time.sleep(0.02)
        conn.execute("SET lock_timeout = '5s'")
        conn.execute("INSERT INTO ev VALUES (1, 150)")  # not queued behind the detach
        reader.rollback()
        thread.join(30)
    assert not failure, failure
