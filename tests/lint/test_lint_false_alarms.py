"""False alarms found on real migration folders (issue 27 item 8), checked against the server
where the rule's reason is the server's behaviour."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from _cases import CASES, lint_case
from psycopg.pq import TransactionStatus

from pgsteady.lint.config import LintConfig
from pgsteady.lint.engine import Linter, Unit

ONE_QUERY = sorted((CASES / "transaction-nesting").glob("one_query_*.sql"))


def found(sql: str, rule: str, **config: object) -> list[tuple[int, str]]:
    """(line, message) of each finding of ``rule`` in ``sql``."""
    report = Linter(LintConfig(**config)).lint_text(sql)  # type: ignore[arg-type]
    return [(f.line, f.message) for f in report.findings if f.rule == rule]


@pytest.mark.parametrize("case", ONE_QUERY, ids=[p.stem for p in ONE_QUERY])
def test_one_query_files_are_judged_as_the_server_runs_them(pgsteady_database, case: Path):
    """Sent as one query (Prisma, golang-migrate), a file is reported exactly when the server warns or is left in a transaction."""
    sql = case.read_text(encoding="utf-8")
    warnings: list[str] = []
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id bigint PRIMARY KEY); "
                     "CREATE TYPE \"Role\" AS ENUM ('USER', 'ADMIN', 'GUEST')")
        conn.add_notice_handler(lambda d: warnings.append(d.message_primary or "")
                                if d.severity_nonlocalized == "WARNING" else None)
        conn.execute(sql)  # no parameters: the simple protocol, one multi-statement query
        left_open = conn.info.transaction_status != TransactionStatus.IDLE
        if left_open:
            conn.execute("ROLLBACK")
    reported = [f for f in lint_case(sql, str(case)).findings if f.rule == "transaction-nesting"]
    assert bool(reported) == bool(warnings or left_open), (warnings, left_open, reported)
    assert case.stem.endswith("_bad") == bool(reported)


def test_table_created_in_an_open_transaction_is_invisible_to_other_sessions(pgsteady_database):
    """No other session can lock a table created in a transaction still open, so lint asks no timeout for it."""
    with psycopg.connect(pgsteady_database.dsn) as creator, \
            psycopg.connect(pgsteady_database.dsn) as other:
        creator.execute("CREATE TABLE teams (id bigint PRIMARY KEY)")
        with pytest.raises(psycopg.errors.UndefinedTable):
            other.execute("LOCK TABLE teams IN ACCESS SHARE MODE NOWAIT")
        creator.execute("CREATE INDEX teams_id_idx ON teams (id)")
        creator.rollback()
    sql = ("CREATE TABLE teams (id bigint PRIMARY KEY);\n"
           "CREATE INDEX teams_id_idx ON teams (id);\n")
    for rule in ("require-lock-timeout", "require-statement-timeout"):
        assert found(sql, rule, assume_runner_timeouts=False) == []


@pytest.mark.parametrize("rule", ["require-lock-timeout", "require-statement-timeout"])
def test_timeout_finding_points_at_the_existing_table(rule: str):
    """A file that builds new tables and then locks an existing one (a foreign key to it) is reported there."""
    sql = ("CREATE TABLE teams (id bigint PRIMARY KEY, owner_id bigint);\n"
           "CREATE INDEX teams_owner_idx ON teams (owner_id);\n"
           "ALTER TABLE teams ADD CONSTRAINT teams_parent_fk FOREIGN KEY (owner_id) "
           "REFERENCES teams (id);\n"
           "CREATE TABLE members (team_id bigint REFERENCES teams, user_id bigint REFERENCES users);\n"
           "ALTER TABLE users ADD COLUMN nickname text;\n")
    assert [line for line, _ in found(sql, rule, assume_runner_timeouts=False)] == [4]


def test_set_not_null_on_a_column_already_not_null_is_not_reported():
    """SET NOT NULL is reported for a nullable column only, not for one created NOT NULL or a key's."""
    history = ("CREATE TABLE accounts (id text NOT NULL, email text NOT NULL, nick text, "
               "CONSTRAINT accounts_pkey PRIMARY KEY (id));\n")
    sql = ("ALTER TABLE accounts ALTER COLUMN id SET NOT NULL;\n"
           "ALTER TABLE accounts ALTER COLUMN email SET NOT NULL;\n"
           "ALTER TABLE accounts ALTER COLUMN nick SET NOT NULL;\n")
    linter = Linter(LintConfig())
    report = linter.lint_units([Unit("m.sql", sql)], history=[Unit("h.sql", history)]).files[0]
    hits = [(f.line, f.message) for f in report.findings
            if f.rule == "set-not-null-without-check"]
    assert [line for line, _ in hits] == [3]
    assert "accounts.nick" in hits[0][1]


def test_multiple_foreign_keys_reported_once_per_transaction():
    """Three foreign keys to three existing tables, one per statement, are one finding."""
    sql = (CASES / "multiple-foreign-keys" / "three_alters_bad.sql").read_text()
    hits = found(sql, "multiple-foreign-keys")
    assert [line for line, _ in hits] == [2]
    assert "(customers, products)" in hits[0][1]


def test_multiple_foreign_keys_reported_again_in_a_new_transaction():
    """Each explicit transaction that locks two referenced tables gets its own finding."""
    block = ("BEGIN;\n"
             "ALTER TABLE orders ADD CONSTRAINT a_fk FOREIGN KEY (a) REFERENCES customers (id);\n"
             "ALTER TABLE orders ADD CONSTRAINT b_fk FOREIGN KEY (b) REFERENCES products (id);\n"
             "ALTER TABLE orders ADD CONSTRAINT c_fk FOREIGN KEY (c) REFERENCES stores (id);\n"
             "COMMIT;\n")
    hits = found(block * 2, "multiple-foreign-keys", assume_in_transaction=False)
    assert [line for line, _ in hits] == [3, 8]


def test_required_field_after_deleting_every_row_in_the_transaction():
    """A NOT NULL column added to a table its transaction just emptied has no row to fail on.

    From LemmyNet/lemmy migrations/2021-03-09-171136_split_user_table_2/up.sql (diesel).
    """
    emptied = ("DELETE FROM password_reset_request;\n"
               "ALTER TABLE password_reset_request DROP COLUMN user_id;\n"
               "ALTER TABLE password_reset_request\n"
               "    ADD COLUMN local_user_id integer NOT NULL REFERENCES local_user (id);\n")
    assert found(emptied, "adding-required-field") == []
    some_rows = emptied.replace(";\n", " WHERE published < now();\n", 1)
    assert [line for line, _ in found(some_rows, "adding-required-field")] == [4]
    refilled = emptied.replace("ALTER TABLE password_reset_request DROP COLUMN user_id;\n",
                               "INSERT INTO password_reset_request SELECT * FROM old_requests;\n")
    assert [line for line, _ in found(refilled, "adding-required-field")] == [4]
