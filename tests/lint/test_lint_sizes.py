"""With --dsn, size-aware findings name the table's rows and size, graded by --large-table."""

from __future__ import annotations

import json

import psycopg
import pytest

from pgsteady.cli import main


@pytest.fixture
def sized_database(pgsteady_database):
    """A database with a 5000-row table `orders` (indexed) and a 10-row table `flags`."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, status text)")
        conn.execute("INSERT INTO orders SELECT g, 'new' FROM generate_series(1, 5000) g")
        conn.execute("CREATE INDEX orders_status_idx ON orders (status)")
        conn.execute("CREATE TABLE flags (id bigint PRIMARY KEY)")
        conn.execute("INSERT INTO flags SELECT generate_series(1, 10)")
        conn.execute("ANALYZE orders")
        conn.execute("ANALYZE flags")
    return pgsteady_database


def lint_json(capsys, path, *argv: str) -> tuple[int, dict]:
    code = main(["lint", "--format", "json", str(path), *argv])
    return code, json.loads(capsys.readouterr().out)


def test_large_table_is_an_error_small_one_a_warning(sized_database, tmp_path, capsys):
    """Above --large-table the finding is an error stating rows and size; below, a warning."""
    path = tmp_path / "m.sql"
    path.write_text("CREATE INDEX orders_x ON orders (status);\n"
                    "CREATE INDEX flags_x ON flags (id);\n")
    code, document = lint_json(capsys, path, "--dsn", sized_database.dsn,
                               "--large-table", "1000")
    big, small = document["findings"]
    assert code == 1
    assert (big["severity"], big["rows"], big["table"]) == ("error", 5000, "orders")
    assert big["size_bytes"] > 0 and big["lock"] == "SHARE"
    assert "takes SHARE on orders: ~5,000 rows" in big["message"]
    assert (small["severity"], small["rows"]) == ("warning", 10)
    assert "below --large-table 1,000" in small["message"]


def test_everything_below_threshold_passes(sized_database, tmp_path, capsys):
    """When every table is below the threshold, the findings are warnings and the exit is 0."""
    path = tmp_path / "m.sql"
    path.write_text("VACUUM FULL orders;\n")
    code, document = lint_json(capsys, path, "--dsn", sized_database.dsn,
                               "--large-table", "1M")
    assert code == 0
    assert document["findings"][0]["severity"] == "warning"
    assert document["findings"][0]["lock"] == "ACCESS EXCLUSIVE"


def test_index_resolves_to_its_table(sized_database, tmp_path, capsys):
    """REINDEX INDEX is sized by the table the index belongs to."""
    path = tmp_path / "m.sql"
    path.write_text("REINDEX INDEX orders_status_idx;\n")
    _, document = lint_json(capsys, path, "--dsn", sized_database.dsn, "--large-table", "100")
    (finding,) = document["findings"]
    assert finding["rows"] == 5000 and finding["severity"] == "error"
    assert "orders: ~5,000 rows" in finding["message"]


def test_unknown_table_keeps_the_error(sized_database, tmp_path, capsys):
    """A table the database lacks is not guessed small: the finding stays an error."""
    path = tmp_path / "m.sql"
    path.write_text("UPDATE ghosts SET a = 1;\n")
    code, document = lint_json(capsys, path, "--dsn", sized_database.dsn)
    assert code == 1
    assert document["findings"][0]["severity"] == "error"
    assert "ghosts: not in the database" in document["findings"][0]["message"]


def test_without_dsn_behaviour_is_unchanged(tmp_path, capsys):
    """No database: no sizes, every finding an error as before."""
    path = tmp_path / "m.sql"
    path.write_text("CREATE INDEX flags_x ON flags (id);\n")
    code, document = lint_json(capsys, path)
    assert code == 1
    finding = document["findings"][0]
    assert (finding["rows"], finding["severity"], finding["table"]) == (None, "error", "flags")


def test_unreachable_database_exits_3(tmp_path, capsys):
    """A --dsn nobody answers is one 'cannot connect' line and exit 3."""
    path = tmp_path / "m.sql"
    path.write_text("CREATE INDEX flags_x ON flags (id);\n")
    code = main(["lint", str(path), "--dsn", "host=127.0.0.1 port=1 connect_timeout=2"])
    assert code == 3
    assert "cannot connect" in capsys.readouterr().err


@pytest.fixture
def typed_database(pgsteady_database):
    """A database whose `accounts` has pin integer, name varchar(50), token char(36)."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE accounts (id bigint PRIMARY KEY, pin integer, "
                     "name varchar(50), token char(36), total numeric(10, 2), tags text[])")
        conn.execute("CREATE VIEW active_accounts AS SELECT id FROM accounts")
    return pgsteady_database


def test_live_catalog_gives_the_old_column_types(typed_database, tmp_path, capsys):
    """With --dsn the catalog says what each column is: int->text and char->varchar rewrite,
    varchar(50)->text and numeric widening do not; no history needed."""
    path = tmp_path / "m.sql"
    path.write_text("ALTER TABLE accounts ALTER COLUMN pin TYPE text;\n"
                    "ALTER TABLE accounts ALTER COLUMN name TYPE text;\n"
                    "ALTER TABLE accounts ALTER COLUMN token TYPE varchar(36);\n"
                    "ALTER TABLE accounts ALTER COLUMN total TYPE numeric(14, 2);\n"
                    "ALTER TABLE accounts ALTER COLUMN tags TYPE text[];\n")
    code, document = lint_json(capsys, path, "--dsn", typed_database.dsn, "--exclude",
                               "require-lock-timeout,require-statement-timeout")
    found = [(f["line"], f["rule"], f["severity"]) for f in document["findings"]]
    assert found == [(1, "changing-column-type", "error"),
                     (3, "changing-column-type", "error")]  # never analyzed: kept as errors
    assert "from int4 to text" in document["findings"][0]["message"]
    assert "from bpchar(36) to varchar(36)" in document["findings"][1]["message"]
    assert code == 1


def test_live_catalog_knows_which_views_exist(typed_database, tmp_path, capsys):
    """CREATE OR REPLACE VIEW is reported for a view the database has, not for a new one."""
    path = tmp_path / "m.sql"
    path.write_text("CREATE OR REPLACE VIEW active_accounts AS SELECT id, name FROM accounts;\n"
                    "CREATE OR REPLACE VIEW brand_new AS SELECT 1 AS one;\n")
    _, document = lint_json(capsys, path, "--dsn", typed_database.dsn)
    assert [(f["line"], f["rule"]) for f in document["findings"]] == [(1, "replacing-view")]
