"""Other tools' folders: naming, order, Up parts and their line mapping, transactions."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from pgsteady.tools import _base
from pgsteady.tools import registry as layouts
from pgsteady.tools.dbmate import dbmate_up
from pgsteady.tools.goose import goose_up
from pgsteady.tools.registry import LayoutError
from pgsteady.tools.sql_migrate import sql_migrate_up


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, body in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body).lstrip())
    return folder


def test_goose_up_section_maps_back_to_file_lines(tmp_path):
    """goose: only the Up section runs; its line n is the file's line first_line+n-1."""
    write(tmp_path, {"20240101000002_b.sql": """
        -- +goose Up
        -- +goose StatementBegin
        CREATE TABLE b (id int);
        -- +goose StatementEnd
        -- +goose Down
        DROP TABLE b;
        """, "20240101000001_a.sql": "-- +goose Up\nCREATE TABLE a (id int);\n"})
    scan = layouts.scan(tmp_path, "goose")
    assert [f.tag for f in scan.files] == ["20240101000001", "20240101000002"]
    second = scan.files[1]
    assert "DROP TABLE" not in second.up.text and "CREATE TABLE b" in second.up.text
    offset = second.up.text.splitlines().index("CREATE TABLE b (id int);") + 1
    assert second.up.file_line(offset) == 3
    assert second.transactional is True


def test_goose_no_transaction_and_bad_annotations(tmp_path):
    """goose: NO TRANSACTION is honoured; a missing Up or Down-before-Up is refused by line."""
    up, transactional = goose_up(
        tmp_path / "1_x.sql", "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX "
                              "CONCURRENTLY i ON t (a);\n")
    assert transactional is False and up.first_line == 3
    with pytest.raises(LayoutError, match=r"1_x.sql:1: no '-- \+goose Up'"):
        goose_up(tmp_path / "1_x.sql", "CREATE TABLE t ();\n")
    with pytest.raises(LayoutError, match=r":1: '-- \+goose Down' comes before"):
        goose_up(tmp_path / "1_x.sql", "-- +goose Down\nx;\n-- +goose Up\ny;\n")


def test_dbmate_sections_and_transaction_option(tmp_path):
    """dbmate: the up block runs; transaction:false on its line turns the transaction off."""
    text = "-- migrate:up transaction:false\nCREATE INDEX CONCURRENTLY i ON t (a);\n\n" \
           "-- migrate:down\nDROP INDEX i;\n"
    up, transactional = dbmate_up(tmp_path / "1_x.sql", text)
    assert transactional is False
    assert up.text.strip() == "CREATE INDEX CONCURRENTLY i ON t (a);" and up.first_line == 2
    _, transactional = dbmate_up(tmp_path / "1_x.sql", "-- migrate:up\nselect 1;\n")
    assert transactional is True
    with pytest.raises(LayoutError, match="up block first"):
        dbmate_up(tmp_path / "1_x.sql", "-- migrate:down\n-- migrate:up\n")


def test_dbmate_takes_any_name_that_starts_with_digits(tmp_path):
    """dbmate's own pattern is ``^(\\d+).*\\.sql$``: the version is the leading digits, whatever
    follows. supabase/postgres runs dbmate on migrations/db/init-scripts, named
    ``00000000000000-initial-schema.sql`` (a dash, not an underscore)."""
    write(tmp_path, {
        "00000000000001-auth-schema.sql": "-- migrate:up\nCREATE SCHEMA IF NOT EXISTS auth;\n",
        "00000000000000-initial-schema.sql":
            "-- migrate:up\n\n-- Set up realtime\ncreate publication supabase_realtime;\n",
        "20211115181400_update-auth-permissions.sql": "-- migrate:up\nselect 1;\n",
        "20211116000000.sql": "-- migrate:up\nselect 2;\n",
    })
    scan = layouts.scan(tmp_path, "dbmate")
    assert [(f.tag, f.name) for f in scan.files] == [
        ("00000000000000", "initial-schema"), ("00000000000001", "auth-schema"),
        ("20211115181400", "update-auth-permissions"), ("20211116000000", "")]
    assert scan.skipped == []
    assert layouts.detect(tmp_path) == "dbmate"


def test_golang_migrate_up_files_only(tmp_path):
    """golang-migrate: N_name.up.sql run in version order; .down.sql files are ignored."""
    write(tmp_path, {"2_b.up.sql": "select 2;", "2_b.down.sql": "x", "10_c.up.sql": "select 3;",
                     "1_a.up.sql": "select 1;", "1_a.down.sql": "x"})
    scan = layouts.scan(tmp_path, "golang-migrate")
    assert [(f.version, f.name) for f in scan.files] == [(1, "a"), (2, "b"), (10, "c")]
    assert scan.skipped == [] and scan.files[0].transactional is None


def test_prisma_folders(tmp_path):
    """Prisma: <timestamp>_<name>/migration.sql, keyed by folder name; stray files skipped."""
    write(tmp_path, {"20240102000000_second/migration.sql": "select 2;",
                     "20240101000000_init/migration.sql": "select 1;",
                     "migration_lock.toml": 'provider = "postgresql"\n',
                     "notes.txt": "x", "20240103000000_empty/README": "x"})
    scan = layouts.scan(tmp_path, "prisma")
    assert [f.tag for f in scan.files] == ["20240101000000_init", "20240102000000_second"]
    assert scan.files[0].path.name == "migration.sql"
    assert sorted(s.path.name for s in scan.skipped) == ["20240103000000_empty", "notes.txt"]


def test_diesel_folders(tmp_path):
    """Diesel: <version>_<name>/up.sql, the version without its dashes, ordered as text (as
    Diesel orders them); metadata.toml's run_in_transaction = false leaves the transaction to
    the statements; down.sql is not applied; a bad metadata.toml is named."""
    write(tmp_path, {"00000000000000_diesel_initial_setup/up.sql": "select 0;",
                     "00000000000000_diesel_initial_setup/down.sql": "select 0;",
                     "2024-01-02-000000_concurrent/up.sql": "CREATE INDEX CONCURRENTLY i ON t (a);",
                     "2024-01-02-000000_concurrent/metadata.toml": "run_in_transaction = false\n",
                     "2024-01-01-000000_init/up.sql": "select 1;",
                     "2024-01-01-000000_init/metadata.toml": "run_in_transaction = true\n",
                     "2024-01-04-000000_no_key/up.sql": "select 4;",
                     "2024-01-04-000000_no_key/metadata.toml": "reason = 'no key: false'\n",
                     "9_short/up.sql": "select 9;", "10_longer/up.sql": "select 10;",
                     ".keep": "", "README.md": "x", "2024-01-03-000000_empty/down.sql": "x",
                     "data_seed.sql": "insert into t values (1);"})
    scan = layouts.scan(tmp_path, "diesel")
    assert [f.tag for f in scan.files] == ["00000000000000", "10", "20240101000000",
                                           "20240102000000", "20240104000000", "9"]
    assert [f.name for f in scan.files][2:4] == ["init", "concurrent"]
    # a metadata.toml without the key reads as false, as Diesel (serde) reads it
    assert [f.transactional for f in scan.files] == [True, True, True, None, None, True]
    assert all(f.path.name == "up.sql" for f in scan.files)
    reasons = {s.path.name: s.reason for s in scan.skipped if s.said}
    assert "Diesel migrations are folders <version>_<name>/up.sql" in reasons["README.md"]
    assert "holding up.sql" in reasons["2024-01-03-000000_empty"]
    assert "a file; Diesel migrations are folders" in reasons["data_seed.sql"]
    assert layouts.detect(tmp_path) == "diesel"  # a data script beside the folders
    (tmp_path / "9_short" / "metadata.toml").write_text("run_in_transaction = 'no'\n")
    with pytest.raises(LayoutError, match=r"9_short/metadata.toml:1: run_in_transaction must "
                                          r"be true or false"):
        layouts.scan(tmp_path, "diesel")
    (tmp_path / "9_short" / "metadata.toml").write_text("run_in_transaction = \n")
    with pytest.raises(LayoutError, match=r"metadata.toml:1: cannot read it as TOML"):
        layouts.scan(tmp_path, "diesel")
    (tmp_path / "9_short" / "metadata.toml").unlink()
    write(tmp_path, {"2024-0101-000000_same/up.sql": "select 1;"})
    with pytest.raises(LayoutError, match="version 20240101000000 is also used by"):
        layouts.scan(tmp_path, "diesel")


def test_sql_migrate_files(tmp_path):
    """sql-migrate: the Up sections of any .sql with '-- +migrate Up/Down' lines, keyed by
    file name, numbered names first by number (2 before 10), then the others by name;
    notransaction on an Up line; a file without those lines is skipped."""
    write(tmp_path, {
        "10_idx.sql": "-- +migrate Up notransaction\nCREATE INDEX CONCURRENTLY i ON t (a);\n"
                      "-- +migrate Down\nDROP INDEX i;\n",
        "2_init.sql": "-- a comment\n-- +migrate Up\n-- +migrate StatementBegin\n"
                      "CREATE TABLE t (a int);\n-- +migrate StatementEnd\n\n"
                      "-- +migrate Down\nDROP TABLE t;\n",
        "seed.sql": "-- +migrate Up\nINSERT INTO t VALUES (1);\n",
        "notes.sql": "select 1;\n"})
    assert layouts.detect(tmp_path) == "sql-migrate"
    scan = layouts.scan(tmp_path, "sql-migrate")
    assert [f.tag for f in scan.files] == ["2_init.sql", "10_idx.sql", "seed.sql"]
    assert [f.transactional for f in scan.files] == [True, False, True]
    lines = scan.files[0].up.text.splitlines()
    assert "DROP TABLE t;" not in lines and lines.index("CREATE TABLE t (a int);") + 1 == 4
    assert [(s.path.name, s.reason) for s in scan.skipped] == [
        ("notes.sql", "no '-- +migrate Up' or '-- +migrate Down' line")]


def test_sql_migrate_reads_its_marks_as_sql_migrate_does(tmp_path):
    """Every Up section runs (a second one after a Down too), a Down may come first, marks
    count only exactly as sql-migrate writes them, and a file of marks alone is empty."""
    up, transactional = sql_migrate_up(tmp_path / "1_x.sql", (
        "-- +migrate Down\nDROP TABLE b;\n-- +migrate Up\nCREATE TABLE a (i int);\n"
        "-- +migrate Down\nDROP TABLE a;\n-- +migrate Up notransaction\n"
        "CREATE TABLE b (i int);\n  -- +migrate Down\n-- +migrate up\nSELECT 1;\n"))
    assert [line for line in up.text.splitlines() if line] == [
        "CREATE TABLE a (i int);", "CREATE TABLE b (i int);", "  -- +migrate Down", "SELECT 1;"]
    assert up.text.splitlines()[3] == "CREATE TABLE a (i int);"  # line 4 of the file
    assert transactional is False
    empty, _ = sql_migrate_up(tmp_path / "2_y.sql", "-- +migrate Up\n-- +migrate Down\n")
    assert not empty.text.strip()
    with pytest.raises(LayoutError, match=r"3_z.sql:1: no '-- \+migrate Up' or "):
        sql_migrate_up(tmp_path / "3_z.sql", "-- +migrate up\nSELECT 1;\n")


def test_tern_files(tmp_path):
    """tern: the text before '---- create above / drop below ----' runs (all of a file with no
    drop part), split where tern splits, wherever it is; only tern's exact disable-tx line
    turns the transaction off; files with and without the mark together are one tern
    folder, numbered without gaps."""
    write(tmp_path, {
        "001_create.sql": "create table t (a int);\n\n---- create above / drop below ----\n"
                          "\ndrop table t;\n",
        "002_add.sql": "alter table t add column b int;\n",
        "003_idx.sql": "---- tern: disable-tx ----\ncreate index concurrently i on t (b);\n"
                       "---- create above / drop below ----\ndrop index i;\n",
        "004_indented.sql": "create table u (a int);\n  ---- create above / drop below ----\n"
                            "drop table u;\n",
        "005_other_case.sql": "---- disable-tx ----\ncreate table v (a int);\n"
                              "---- CREATE ABOVE / DROP BELOW ----\ncreate table w (a int);\n"})
    assert layouts.detect(tmp_path) == "tern"
    scan = layouts.scan(tmp_path, "tern")
    assert [f.tag for f in scan.files] == ["1", "2", "3", "4", "5"]
    assert [f.transactional for f in scan.files] == [True, True, False, True, True]
    assert "drop" not in scan.files[0].up.text and "drop" not in scan.files[2].up.text
    assert "drop" not in scan.files[3].up.text
    assert "create table w" in scan.files[4].up.text  # not tern's mark: all of it runs
    assert scan.files[1].up.text == "alter table t add column b int;\n"
    (tmp_path / "002_add.sql").rename(tmp_path / "007_add.sql")
    with pytest.raises(LayoutError, match=r"003_idx.sql:1: tern numbers migrations 1, 2, 3... "
                                          r"without gaps, and 2 is missing"):
        layouts.scan(tmp_path, "tern")


@pytest.mark.parametrize(("mark", "tool"), [
    ("-- //@UNDO", "MyBatis Migrations"), ("-- rambler down", "rambler"),
    ("-- !Downs", "Play evolutions"), ("-- +migrate Down", "sql-migrate"),
    ("---- create above / drop below ----", "tern")])
def test_a_pgsteady_file_holding_a_rollback_part_is_refused(tmp_path, mark, tool):
    """Read as pgsteady files, other tools' files would run their rollback right after the
    change: such a file is refused, naming the line, before anything runs."""
    write(tmp_path, {"20240101000000_people.sql":
                     f"-- {tool}\nCREATE TABLE people (id int);\n\n  {mark}\nDROP TABLE people;\n"})
    with pytest.raises(LayoutError, match=rf"20240101000000_people.sql:4: '{re.escape(mark)}' "
                                          rf"starts a rollback part.*--tool"):
        layouts.scan(tmp_path, "pgsteady")


def test_flyway_versions_and_transactions(tmp_path):
    """Flyway: V1_1 is 1.1, ordered numerically; .conf and header turn transactions off (or
    on); without them Flyway decides from the statements (None here, see the next test)."""
    write(tmp_path, {"V1__init.sql": "select 1;", "V1_1__more_things.sql": "select 2;",
                     "V2__concurrent.sql": "CREATE INDEX CONCURRENTLY i ON t (a);",
                     "V2__concurrent.sql.conf": "executeInTransaction=false\n",
                     "V10__header.sql": "-- flyway:executeInTransaction=false\nselect 4;",
                     "V11__on.sql": "-- flyway:executeInTransaction=true\nselect 6;",
                     "R__views.sql": "select 5;"})
    scan = layouts.scan(tmp_path, "flyway")
    assert [f.tag for f in scan.files] == ["1", "1.1", "2", "10", "11", "R__views"]
    assert scan.files[1].name == "more things"
    assert [f.transactional for f in scan.files] == [None, None, False, False, True, None]
    assert [f.repeatable for f in scan.files] == [False] * 5 + [True]  # after the versions
    assert scan.skipped == []


def test_flyway_runs_a_script_with_a_concurrently_statement_outside_a_transaction(tmp_path):
    """As Flyway's own parser does: a script holding CREATE INDEX CONCURRENTLY (or VACUUM, ...)
    runs without a transaction, statement by statement; others in one; a header saying
    executeInTransaction=true keeps the transaction, and the statement is then refused."""
    from pgsteady.errors import BadMigration
    from pgsteady.migrate import source

    write(tmp_path, {"V1__create.sql": "CREATE TABLE t (a int);\nCREATE INDEX i0 ON t (a);",
                     "V2__index.sql": "CREATE INDEX CONCURRENTLY i1 ON t (a);",
                     "V3__two.sql": "CREATE INDEX CONCURRENTLY i2 ON t (a);\n"
                                    "DROP INDEX CONCURRENTLY i1;",
                     "V4__vacuum.sql": "-- vacuum after the load\nVACUUM t;"})
    assert [m.transactional for m in source.load_dir(tmp_path, "flyway")] == [
        True, False, False, False]
    write(tmp_path, {"V5__forced.sql": "-- flyway:executeInTransaction=true\n"
                                       "CREATE INDEX CONCURRENTLY i3 ON t (a);"})
    with pytest.raises(BadMigration, match=r"V5__forced.sql:2: CREATE INDEX CONCURRENTLY "
                                           r"cannot run inside a transaction"):
        source.load_dir(tmp_path, "flyway")
    (tmp_path / "V5__forced.sql").unlink()
    # a mix runs as Flyway runs it with mixed=true (lint reports it: Flyway's default refuses)
    write(tmp_path, {"V6__mixed.sql": "ALTER TABLE t ADD COLUMN x int;\n"
                                      "CREATE INDEX CONCURRENTLY i4 ON t (x);"})
    assert [m.transactional for m in source.load_dir(tmp_path, "flyway")][-1] is False


def test_detect_each_layout(tmp_path):
    """Auto-detection names each tool's folder, and refuses a folder that fits two."""
    cases = {
        "pgsteady": {"0001_a.sql": "select 1;"},
        "goose": {"1_a.sql": "-- +goose Up\nselect 1;"},
        "dbmate": {"1_a.sql": "-- migrate:up\nselect 1;"},
        "golang-migrate": {"1_a.up.sql": "select 1;", "1_a.down.sql": "select 1;"},
        "flyway": {"V1__a.sql": "select 1;"},
        "prisma": {"20240101000000_a/migration.sql": "select 1;"},
        "diesel": {"2024-01-01-000000_a/up.sql": "select 1;",
                   "2024-01-01-000000_a/down.sql": "select 1;"},
        "sql-migrate": {"1_a.sql": "-- +migrate Up\nselect 1;\n-- +migrate Down\nselect 2;"},
        "tern": {"001_a.sql": "select 1;\n---- create above / drop below ----\nselect 2;",
                 "002_b.sql": "select 3;"},
    }
    for name, files in cases.items():
        folder = write(tmp_path / name, files)
        assert layouts.detect(folder) == name
    mixed = write(tmp_path / "mixed", {"V1__a.sql": "x", "1_a.up.sql": "x"})
    with pytest.raises(LayoutError, match="flyway and golang-migrate; pass --tool"):
        layouts.detect(mixed)


def test_skipped_entries_are_reported(tmp_path):
    """Upper-case .SQL, dangling links and subfolders are skipped with a reason each."""
    write(tmp_path, {"0001_a.sql": "select 1;", "0002_b.SQL": "select 2;",
                     "sub/0003_c.sql": "select 3;"})
    (tmp_path / "0004_d.sql").symlink_to(tmp_path / "missing.sql")
    scan = layouts.scan(tmp_path, "pgsteady")
    assert [f.name for f in scan.files] == ["a"]
    reasons = {s.path.name: s.reason for s in scan.skipped}
    assert "lower-case .sql" in reasons["0002_b.SQL"]
    assert "symbolic link to nothing" in reasons["0004_d.sql"]
    assert "subfolder" in reasons["sub"]


def test_too_large_version_is_refused(tmp_path):
    """A version above bigint's range is a bad file, named, not a database error later."""
    write(tmp_path, {"99999999999999999999_big.sql": "select 1;"})
    with pytest.raises(LayoutError, match="99999999999999999999 is too large"):
        layouts.scan(tmp_path, "pgsteady")


def test_layouts_and_sqltext_import_no_driver():
    """layouts and sqltext import only the standard library and pgsteady's record base, which
    imports nothing (lint must start fast)."""
    root = Path(layouts.__file__).parent.parent
    tools = sorted((root / "tools").glob("*.py"))
    for path in (*tools, root / "sql" / "text.py", root / "_record.py"):
        tree = ast.parse(path.read_text())
        names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
        names |= {node.module or "" for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom)}
        assert not {n for n in names if n.split(".")[0] in ("psycopg", "pglast", "rich")}
        assert not {n for n in names if n.startswith("pgsteady")
                    and not n.startswith("pgsteady.tools")} - {"pgsteady._record"}, path
        if path.name == "_record.py":
            assert names <= {"__future__", "typing"}, names


def test_statements_match_a_whole_file_parse(tmp_path):
    """Split-then-parse (with same-shape reuse) gives what parsing the whole file gave."""
    from pgsteady.migrate import source
    from pgsteady.sql import analysis

    text = ("-- header\nCREATE TABLE t (id int, note text);\n"
            "INSERT INTO t VALUES (1, 'a;b');  /* c */ INSERT INTO t VALUES (2, 'x');\n"
            "\n  -- why\n  INSERT INTO t\n    VALUES (3, $$;$$);\n"
            "INSERT INTO t VALUES (4, E'\\';')\n;ALTER TABLE t ADD COLUMN c int; SELECT 1\n")
    ours = source.statements_of(tmp_path / "x.sql", layouts.UpPart(text))
    whole = analysis.analyze(text)
    assert [(s.sql, s.line, s.col, s.kind, s.targets) for s in ours] == \
        [(s.sql, s.line, s.col, s.kind, s.targets) for s in whole]


def test_one_listing_serves_detect_and_scan_with_the_same_text(tmp_path, monkeypatch):
    """detect and scan share one listing: each small file is opened once, and the text scan
    gets from detect's read is what reading the file gives (BOM dropped, CRLF and CR as LF);
    a file larger than detect's look is read again whole; a dangling link is still named."""
    (tmp_path / "1_a.sql").write_bytes(b"\xef\xbb\xbfCREATE TABLE a (id int);\r\n-- x\r")
    big = "SELECT 1;\n" * (_base.DETECT_BYTES // 10 + 10)
    (tmp_path / "2_big.sql").write_text(big)
    (tmp_path / "3_gone.sql").symlink_to(tmp_path / "nowhere.sql")
    opened: list[str] = []
    real_open = Path.open

    def counting_open(self, *args, **kwargs):
        opened.append(self.name)
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    listing = layouts.Listing.of(tmp_path)
    assert layouts.detect(tmp_path, listing) == "pgsteady"
    found = layouts.scan(tmp_path, "pgsteady", listing)
    assert opened.count("1_a.sql") == 1 and opened.count("2_big.sql") == 2
    monkeypatch.undo()
    assert [f.text for f in found.files] == [layouts.read(tmp_path / "1_a.sql"), big]
    assert found.files[0].text == "CREATE TABLE a (id int);\n-- x\n"
    assert [(s.path.name, "nothing" in s.reason) for s in found.skipped] == [("3_gone.sql", True)]


def test_a_begin_commit_pair_inside_another_tools_file_is_dropped(tmp_path):
    """Under the tool's own transaction a file's BEGIN does nothing and its COMMIT ends that
    transaction early; pgsteady drops the pair and runs the file as one transaction. A
    ROLLBACK, or a pair in a pgsteady file, is still refused."""
    from pgsteady.errors import BadMigration
    from pgsteady.migrate import source

    write(tmp_path, {"V1__a.sql": "CREATE TABLE t (a int);\nBEGIN;\nALTER TABLE t ADD b int;\n"
                                  "COMMIT;\nINSERT INTO t VALUES (1);\n"})
    (migration,) = source.load_dir(tmp_path, "flyway")
    assert migration.transactional
    assert [s.kind for s in migration.statements] == [
        "CREATE TABLE", "ALTER TABLE ... ADD COLUMN", "INSERT"]
    write(tmp_path, {"V2__b.sql": "BEGIN;\nSELECT 1;\nROLLBACK;\n"})
    with pytest.raises(BadMigration, match=r"V2__b.sql:1: BEGIN is not allowed"):
        source.load_dir(tmp_path, "flyway")
