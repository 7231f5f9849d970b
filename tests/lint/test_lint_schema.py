"""The schema model replayed from the folder: old column types, new tables, quoting, schemas."""

from __future__ import annotations

import pytest

from pgsteady.lint.engine import Linter, Unit
from pgsteady.lint.schema import ColumnType, Schema, rewrites


def lint(*files: str, history: tuple[str, ...] = ()) -> list[tuple[str, int, str, str]]:
    """(file, line, rule, severity) for every finding when the files run in order."""
    units = [Unit(f"{n:04}.sql", text) for n, text in enumerate(files, start=1)]
    report = Linter().lint_units(units, history=[Unit("h.sql", h) for h in history])
    assert not report.syntax_errors, report.syntax_errors
    return [(f.path, f.line, f.rule, f.severity) for f in report.findings]


def rules(*files: str, history: tuple[str, ...] = ()) -> set[str]:
    return {rule for _, _, rule, _ in lint(*files, history=history)}


TABLE = ("CREATE TABLE t (id bigint PRIMARY KEY, pin integer, ext bigint, token char(36), "
         "note text, email varchar(64), total numeric(10, 2), name varchar(20));")


@pytest.mark.parametrize(("change", "rewrites_table"), [
    ("ALTER TABLE t ALTER COLUMN pin SET DATA TYPE text", True),
    ("ALTER TABLE t ALTER COLUMN ext TYPE text", True),
    ("ALTER TABLE t ALTER COLUMN token TYPE varchar(36)", True),
    ("ALTER TABLE t ALTER COLUMN note TYPE varchar(32)", True),
    ("ALTER TABLE t ALTER COLUMN email TYPE varchar(32)", True),
    ("ALTER TABLE t ALTER COLUMN name TYPE text", False),
    ("ALTER TABLE t ALTER COLUMN name TYPE varchar(200)", False),
    ("ALTER TABLE t ALTER COLUMN note TYPE varchar", False),
    ("ALTER TABLE t ALTER COLUMN total TYPE numeric(12, 2)", False),
    ("ALTER TABLE t ALTER COLUMN total TYPE numeric(12, 3)", True),
    ("ALTER TABLE t ALTER COLUMN pin TYPE int4", False),
])
def test_type_change_is_judged_by_the_old_type(change, rewrites_table):
    """With the table from an earlier file, int->text etc. are errors; varchar->text is silent."""
    found = lint(TABLE, change + ";")
    hits = [(line, sev) for path, line, rule, sev in found if rule == "changing-column-type"]
    assert hits == ([(1, "error")] if rewrites_table else [])


def test_type_change_with_old_type_from_history():
    """--history supplies the old type just as an earlier file in the folder does."""
    assert "changing-column-type" in rules("ALTER TABLE t ALTER COLUMN pin TYPE text;",
                                           history=(TABLE,))


def test_unknown_old_type_is_a_may_rewrite_warning():
    """Without the table's history, a change to text is a warning that says it may rewrite."""
    found = Linter().lint_text("ALTER TABLE users ALTER COLUMN name TYPE text;").findings
    assert [(f.rule, f.severity) for f in found] == [("changing-column-type", "warning")]
    assert "may rewrite" in found[0].message and "--history" in found[0].message


def test_type_follows_renames_and_earlier_type_changes():
    """The model follows RENAME COLUMN / TABLE and earlier ALTER TYPEs."""
    assert "changing-column-type" not in rules(
        TABLE, "ALTER TABLE t RENAME TO t2; ALTER TABLE t2 RENAME COLUMN name TO n;",
        "ALTER TABLE t2 ALTER COLUMN n TYPE text;")
    assert "changing-column-type" in rules(TABLE, "ALTER TABLE t ALTER COLUMN name TYPE int;",
                                           "ALTER TABLE t ALTER COLUMN name TYPE text;")


def test_quoted_table_is_not_the_unquoted_one():
    """After CREATE TABLE "Users", an index on the existing users is still flagged."""
    found = rules('CREATE TABLE "Users" (id bigint PRIMARY KEY, email text);\n'
                  "CREATE INDEX users_email ON users (email);")
    assert "require-concurrent-index-creation" in found
    assert "require-concurrent-index-creation" not in rules(
        'CREATE TABLE "Users" (id bigint PRIMARY KEY, email text);\n'
        'CREATE INDEX users_email ON "Users" (email);')


def test_schemas_are_kept_apart():
    """A new audit.events does not make public.events new; search_path decides unqualified."""
    created = "CREATE TABLE audit.events (id bigint PRIMARY KEY, at timestamptz);\n"
    assert "require-concurrent-index-creation" in rules(
        created + "CREATE INDEX events_at ON public.events (at);")
    assert "require-concurrent-index-creation" in rules(
        created + "CREATE INDEX events_at ON events (at);")
    assert "require-concurrent-index-creation" not in rules(
        created + "CREATE INDEX events_at ON audit.events (at);")
    assert "require-concurrent-index-creation" not in rules(
        "SET search_path = audit, public;\n" + created + "CREATE INDEX events_at ON events (at);")


def test_create_table_if_not_exists_is_new_unless_known():
    """CREATE TABLE IF NOT EXISTS of an unknown table is new; of a table history made, not."""
    sql = ("CREATE TABLE IF NOT EXISTS orgs (id bigint PRIMARY KEY, x int);\n"
           "CREATE INDEX orgs_x ON orgs (x);")
    assert "require-concurrent-index-creation" not in rules(sql)
    assert "require-concurrent-index-creation" in rules(
        sql, history=("CREATE TABLE orgs (id bigint PRIMARY KEY, x int);",))


def test_table_from_an_earlier_file_is_not_new_without_history():
    """Linting a folder, a table another file created is an existing table (it has rows)."""
    assert "require-concurrent-index-creation" in rules(
        "CREATE TABLE orgs (id bigint PRIMARY KEY, x int);", "CREATE INDEX orgs_x ON orgs (x);")


def test_files_given_after_history_are_one_change():
    """With --history, a table created in one checked file is new in the next checked one."""
    assert "require-concurrent-index-creation" not in rules(
        "CREATE TABLE orgs (id bigint PRIMARY KEY, x int);", "CREATE INDEX orgs_x ON orgs (x);",
        history=("SELECT 1;",))


def test_multiple_foreign_keys_skips_tables_created_in_the_file():
    """References to tables created earlier in the file do not count; two existing ones do."""
    assert "multiple-foreign-keys" not in rules(
        "CREATE TABLE customers (id bigint PRIMARY KEY);\n"
        "CREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint REFERENCES customers,"
        " product_id bigint REFERENCES products);")
    assert "multiple-foreign-keys" in rules(
        "CREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint REFERENCES customers,"
        " product_id bigint REFERENCES products);")


def test_rewrites_table_of_pairs():
    """The rewrite verdict: unknown old type is None; binary-coercible pairs are False."""
    varchar, text = ColumnType("varchar", (20,)), ColumnType("text")
    assert rewrites(None, text) is None
    assert rewrites(varchar, text) is False
    assert rewrites(text, varchar) is True
    assert rewrites(ColumnType("int4"), ColumnType("int8")) is True
    assert rewrites(ColumnType("int4", array=True), ColumnType("int4")) is True


def test_schema_replay_tracks_views_enums_partitions_and_drops():
    """Views, enums (with renamed labels), partitions and drops are followed."""
    schema = Schema()
    linter = Linter()
    linter.replay_text(
        "CREATE TYPE mood AS ENUM ('ok', 'sad'); ALTER TYPE mood RENAME VALUE 'ok' TO 'fine';"
        "CREATE TABLE p (id bigint, at date) PARTITION BY RANGE (at);"
        "CREATE TABLE p1 PARTITION OF p FOR VALUES FROM ('2020-01-01') TO ('2021-01-01');"
        "CREATE VIEW v AS SELECT 1; CREATE TABLE gone (id int); DROP TABLE gone;", schema)
    assert schema.enums[("public", "mood")] == ["fine", "sad"]
    assert schema.tables[("public", "p1")].partition_of == ("public", "p")
    assert schema.tables[("public", "p1")].columns["at"] == ColumnType("date")
    assert ("public", "v") in schema.views
    assert ("public", "gone") not in schema.tables


def test_history_option_on_the_command_line(tmp_path, capsys):
    """`--history DIR` replays the files before the one checked: int->text is then an error,
    and the checked file itself is not replayed twice."""
    from pgsteady.cli import main

    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "0001_t.sql").write_text("CREATE TABLE t (id bigint PRIMARY KEY, pin integer);\n")
    (folder / "0002_index.sql").write_text("CREATE INDEX t_pin ON t (pin);\n")
    change = folder / "0003_type.sql"
    change.write_text("ALTER TABLE t ALTER COLUMN pin TYPE text;\n")
    assert main(["lint", "--no-cache", "--history", str(folder), str(change)]) == 1
    out = capsys.readouterr().out
    assert "from int4 to text" in out and "t_pin" not in out
    assert main(["lint", "--no-cache", str(change)]) == 0  # unknown old type: a warning
    assert "may rewrite" in capsys.readouterr().out
