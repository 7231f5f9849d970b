"""Bad migration files: one line naming the file and line, exit 2, and nothing applied."""

from __future__ import annotations

import psycopg
import pytest
from migrate_helpers import columns, history, run_cli, write_migrations

from pgsteady.errors import BadMigration
from pgsteady.lint.engine import Linter
from pgsteady.migrate import source

GOOD = {"0001_create_orgs.sql": "CREATE TABLE orgs (id int PRIMARY KEY);\n"}


@pytest.mark.parametrize(("files", "where", "says"), [
    ({"0002_bad.sql": "ALTER TABLE orgs ADD COLUMN;\n"}, "0002_bad.sql:1", "syntax error"),
    ({"0002_bad.sql": "-- pgsteady: no-transation\nSELECT 1;\n"}, "0002_bad.sql:1",
     "unknown directive 'no-transation'; known: no-transaction"),
    ({"002_dup.sql": "SELECT 1;\n", "2_other.sql": "SELECT 2;\n"}, ".sql:1",
     "version 2 is also used by"),
    ({"0002_idx.sql": "SELECT 1;\nCREATE INDEX CONCURRENTLY i ON orgs (id);\n"},
     "0002_idx.sql:2", "cannot run inside a transaction; put it alone in a file whose first "
                       "line is '-- pgsteady: no-transaction'"),
    ({"0002_tx.sql": "BEGIN;\nSELECT 1;\nCOMMIT;\n"}, "0002_tx.sql:1", "BEGIN is not allowed"),
    ({"add_flag.sql": "SELECT 1;\n"}, "add_flag.sql:1", "<version>_<name>.sql"),
    ({"0002_two.sql": "-- pgsteady: no-transaction\nCREATE INDEX CONCURRENTLY i ON orgs (id);\n"
                      "SELECT 1;\n"}, "0002_two.sql:3", "exactly one statement"),
    ({"0002_late.sql": "SELECT 1;\n-- pgsteady: no-transaction\n"}, "0002_late.sql:2",
     "must be in the header"),
    ({"0002_empty.sql": "-- nothing here\n"}, "0002_empty.sql:1", "contains no SQL statement"),
])
def test_bad_file_is_one_line_and_nothing_applied(tmp_path, db, files, where, says):
    """A bad file anywhere in the folder stops the run before any statement is sent."""
    folder = write_migrations(tmp_path / "m", {**GOOD, **files})
    result = run_cli("migrate", "--dsn", db, "--dir", str(folder))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert where in lines[0]
    assert says in lines[0]
    assert "Traceback" not in result.stderr
    assert columns(db, "orgs") == []  # not even the good 0001 ran
    assert history(db) == []


def test_syntax_error_line_is_the_bad_line(tmp_path):
    """The line of a syntax error is the line the parser stopped on, not the statement's."""
    folder = write_migrations(tmp_path / "m", {
        "0001_x.sql": "-- create\nCREATE TABLE t (\n  id int,\n  name text text\n);\n"})
    with pytest.raises(BadMigration, match=r"0001_x\.sql:4: syntax error at or near"):
        source.load_dir(folder)


def test_missing_folder_says_which(tmp_path):
    """A folder that does not exist is named, with the option to pass instead."""
    result = run_cli("migrate", "--dsn", "host=127.0.0.1 port=1", "--dir",
                     str(tmp_path / "nope"))
    assert result.returncode == 2
    assert "no such directory" in result.stderr and "--dir" in result.stderr


def test_files_load_in_version_order(tmp_path):
    """Versions sort as numbers; the no-transaction directive is read from the header."""
    folder = write_migrations(tmp_path / "m", {
        "10_c.sql": "SELECT 10;\n",
        "9_b.sql": "-- an index\n-- pgsteady: no-transaction\n"
                   "CREATE INDEX CONCURRENTLY i ON t (a);\n",
        "0001_a.sql": "SELECT 1;\n",
        "README.md": "not a migration\n",
    })
    loaded = source.load_dir(folder)
    assert [(m.version, m.name, m.transactional) for m in loaded] == [
        (1, "a", True), (9, "b", False), (10, "c", True)]
    assert loaded[1].statements[0].line == 3


def test_sqlx_no_transaction_first_line_is_honoured(tmp_path):
    """sqlx's `-- no-transaction` as the first line runs the file outside a transaction; lower
    down, or spelled otherwise, it is only a comment (and CONCURRENTLY is then refused)."""
    folder = write_migrations(tmp_path / "m", {
        "1_a.sql": "-- no-transaction\nCREATE INDEX CONCURRENTLY i ON t (a);\n",
        "2_b.sql": "SELECT 1;\n",
    })
    assert [m.transactional for m in source.load_dir(folder)] == [False, True]
    assert Linter().lint_text((folder / "1_a.sql").read_text(), "1_a.sql").findings == []
    for text in ("-- an index\n-- no-transaction\nCREATE INDEX CONCURRENTLY i ON t (a);\n",
                 "-- no-transactions\nCREATE INDEX CONCURRENTLY i ON t (a);\n"):
        (folder / "1_a.sql").write_text(text)
        with pytest.raises(source.BadMigration, match="cannot run inside a transaction"):
            source.load_dir(folder)


def test_linter_ignore_comments_are_not_directives(tmp_path):
    """`-- pgsteady: ignore <rule> -- <reason>` belongs to the linter; migrate accepts it."""
    folder = write_migrations(tmp_path / "m", {
        "0001_a.sql": "-- pgsteady: ignore-file prefer-jsonb -- legacy payloads\n"
                      "-- pgsteady: ignore ban-lock-table -- tiny table\n"
                      "LOCK TABLE t IN ACCESS EXCLUSIVE MODE;\n"})
    loaded = source.load_dir(folder)
    assert loaded[0].transactional
    assert len(loaded[0].statements) == 1


def test_directives_may_carry_a_reason(tmp_path):
    """`-- pgsteady: no-transaction -- why` reads as the directive plus a comment."""
    folder = write_migrations(tmp_path / "m", {
        "0001_idx.sql": "-- pgsteady: no-transaction -- built without locking writes\n"
                        "CREATE INDEX CONCURRENTLY i ON t (a);\n"})
    assert not source.load_dir(folder)[0].transactional


def test_a_file_given_as_the_folder_says_so(tmp_path):
    """--dir naming a file says it is a file, not that it does not exist."""
    path = tmp_path / "0001_x.sql"
    path.write_text("select 1;\n")
    result = run_cli("migrate", "--dsn", "host=127.0.0.1 port=1", "--dir", str(path))
    assert result.returncode == 2
    assert "a file, not a folder" in result.stderr and "--dir" in result.stderr


def test_a_folder_full_of_strays_names_a_few_and_counts_the_rest(tmp_path, caplog):
    """Pointing --dir at the wrong folder names the first ten strays and counts the others,
    instead of one warning per file; hidden clutter (.gitkeep) is not warned about at all."""
    folder = write_migrations(tmp_path / "m", {"0001_a.sql": "SELECT 1;\n", ".gitkeep": "",
                                               **{f"note{i}.txt": "x" for i in range(25)}})
    with caplog.at_level("WARNING", logger="pgsteady.migrate"):
        found = source.scan_dir(folder)
    assert len(found.files) == 1
    assert len(found.skipped) == 26
    lines = [r.getMessage() for r in caplog.records]
    assert sum(line.startswith("skipped ") and "not a .sql file" in line for line in lines) == 10
    assert any("skipped 15 more entries" in line and "is --dir the migrations folder?" in line
               for line in lines)
    assert not any(".gitkeep" in line for line in lines)


def test_a_hidden_sql_file_is_still_named(tmp_path, caplog):
    """A hidden .sql file looks like a migration someone meant: it is named, with why."""
    folder = write_migrations(tmp_path / "m", {"0001_a.sql": "SELECT 1;\n",
                                               ".0002_b.sql": "SELECT 2;\n"})
    with caplog.at_level("WARNING", logger="pgsteady.migrate"):
        source.scan_dir(folder)
    assert any(".0002_b.sql: a hidden file" in r.getMessage() for r in caplog.records)


# A pg_dump data section, as Flyway baseline scripts made with pg_dump hold them.
_DUMP_COPY = ("CREATE TABLE ae_parameters (id int, vertical text, extra text);\n"
              "--\n-- Data for Name: ae_parameters; Type: TABLE DATA; Schema: public\n--\n\n"
              "COPY ae_parameters (id, vertical, extra) FROM stdin;\n"
              "1\tskin\t\\N\n2\tskin\t\\N\n\\.\n\n"
              "SELECT pg_catalog.setval('x', 30, true);\n")


@pytest.mark.parametrize(("tool", "file", "line"), [
    ("flyway", ("V1__baseline.sql", _DUMP_COPY), 6),
    ("pgsteady", ("0001_load.sql", "CREATE TABLE t (id int);\nCOPY t (id) FROM STDIN;\n"), 2),
    ("goose", ("20240101000000_out.sql",
               "-- +goose Up\nCREATE TABLE t (id int);\nCOPY t TO stdout;\n"), 3),
])
def test_copy_through_the_client_is_refused_before_anything_runs(tmp_path, db, tool, file,
                                                                  line):
    """COPY ... FROM STDIN (psql's inline rows) and COPY ... TO STDOUT need the client's copy
    channel, which migrations do not have: said as a bad file (exit 2, one line, its line),
    not sent (the session then hung in COPY mode and the run ended as 'cannot connect', exit
    3) nor read as a syntax error in the rows."""
    name, text = file
    folder = write_migrations(tmp_path / "m", {name: text})
    result = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--tool", tool)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{name}:{line}: COPY ... {'TO STDOUT' if 'stdout' in text else 'FROM STDIN'}" \
        in lines[0]
    assert "Traceback" not in result.stderr
    with psycopg.connect(db) as conn:  # nothing sent: no table, not even the tool's history
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                            ).fetchone() == (0,)
