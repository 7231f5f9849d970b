"""Runner profiles: each tool's transaction conventions, Up parts, order, detection."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from pgsteady.cli import main

CONCURRENT = "CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_status ON orders (status);\n"
TIMEOUT = "SET lock_timeout = '5s';\nSET statement_timeout = '10min';\n"


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def run(capsys, *argv: str) -> tuple[int, list[tuple[str, str]], str]:
    """(exit code, (file name, rule) per finding, stderr) of a JSON lint run without cache."""
    code = main(["lint", "--no-cache", "--format", "json", *argv])
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    found = [(Path(f["path"]).name if Path(f["path"]).name != "migration.sql"
              else Path(f["path"]).parent.name, f["rule"]) for f in document["findings"]]
    return code, found, document["summary"]["runner"]


def test_prisma_lone_concurrent_index_is_not_in_a_transaction(tmp_path, capsys):
    """Prisma sends a one-statement file on its own: CONCURRENTLY there is fine; with a second
    statement the file is one implicit transaction and it fails."""
    write(tmp_path, {
        "migration_lock.toml": 'provider = "postgresql"\n',
        "20240101000000_index/migration.sql": CONCURRENT,
        "20240102000000_two/migration.sql": TIMEOUT + CONCURRENT,
    })
    code, found, runner = run(capsys, str(tmp_path))
    assert runner == "prisma"
    assert found == [("20240102000000_two", "concurrently-in-transaction")]
    assert code == 1


def test_goose_no_transaction_and_down_section(tmp_path, capsys):
    """goose: NO TRANSACTION files may use CONCURRENTLY; the Down section is not linted."""
    write(tmp_path, {
        "00001_index.sql": "-- +goose NO TRANSACTION\n-- +goose Up\n" + CONCURRENT +
                           "-- +goose Down\nDROP INDEX orders_status;\nDROP TABLE orders;\n",
        "00002_index.sql": "-- +goose Up\n" + CONCURRENT + "-- +goose Down\n",
    })
    _, found, runner = run(capsys, str(tmp_path))
    assert runner == "goose"
    assert found == [("00002_index.sql", "concurrently-in-transaction")]


def test_goose_validate_in_no_transaction_file_is_fine(tmp_path, capsys):
    """validate-in-same-transaction does not fire when goose runs the file without one."""
    body = ("-- +goose Up\n" + TIMEOUT +
            "ALTER TABLE orders ADD CONSTRAINT c CHECK (total > 0) NOT VALID;\n"
            "ALTER TABLE orders VALIDATE CONSTRAINT c;\n")
    write(tmp_path, {"00001_a.sql": "-- +goose NO TRANSACTION\n" + body,
                     "00002_b.sql": body})
    _, found, _ = run(capsys, str(tmp_path))
    assert found == [("00002_b.sql", "validate-in-same-transaction")]


def test_dbmate_transaction_false(tmp_path, capsys):
    """dbmate: `-- migrate:up transaction:false` runs outside a transaction."""
    write(tmp_path, {
        "20240101_a.sql": "-- migrate:up transaction:false\n" + CONCURRENT + "-- migrate:down\n",
        "20240102_b.sql": "-- migrate:up\n" + CONCURRENT + "-- migrate:down\n",
    })
    _, found, runner = run(capsys, str(tmp_path))
    assert runner == "dbmate"
    assert found == [("20240102_b.sql", "concurrently-in-transaction")]


def test_diesel_run_in_transaction_false(tmp_path, capsys):
    """Diesel: detected from <version>_<name>/up.sql folders; a migration whose metadata.toml
    says run_in_transaction = false runs outside a transaction, down.sql is never linted."""
    write(tmp_path, {
        "2024-01-01-000000_a/up.sql": CONCURRENT,
        "2024-01-01-000000_a/down.sql": "DROP TABLE orders;\n",
        "2024-01-01-000000_a/metadata.toml": "run_in_transaction = false\n",
        "2024-01-02-000000_b/up.sql": CONCURRENT,
        "2024-01-02-000000_b/down.sql": "DROP INDEX orders_status;\n",
    })
    code, found, runner = run(capsys, str(tmp_path))
    assert (code, runner) == (1, "diesel")
    assert found == [("up.sql", "concurrently-in-transaction")]
    _, found, _ = run(capsys, str(tmp_path / "2024-01-02-000000_b" / "up.sql"),
                         str(tmp_path / "2024-01-01-000000_a" / "up.sql"))
    assert found == [("up.sql", "concurrently-in-transaction")]


def test_sql_migrate_and_tern_run_only_their_up_parts(tmp_path, capsys):
    """sql-migrate (notransaction on the Up line) and tern (disable-tx): CONCURRENTLY there is
    fine, and the down parts (a DROP TABLE each) are never linted."""
    write(tmp_path / "sm", {
        "1_a.sql": f"-- +migrate Up notransaction\n{CONCURRENT}-- +migrate Down\n"
                   f"DROP TABLE orders;\n",
        "2_b.sql": f"-- +migrate Up\n{CONCURRENT}-- +migrate Down\nDROP TABLE orders;\n"})
    write(tmp_path / "tn", {
        "001_a.sql": f"---- tern: disable-tx ----\n{CONCURRENT}"
                     f"---- create above / drop below ----\nDROP TABLE orders;\n",
        "002_b.sql": f"{CONCURRENT}---- create above / drop below ----\nDROP TABLE orders;\n"})
    for folder, tool, second in (("sm", "sql-migrate", "2_b.sql"), ("tn", "tern", "002_b.sql")):
        _, found, runner = run(capsys, str(tmp_path / folder))
        assert runner == tool
        assert found == [(second, "concurrently-in-transaction")]


def test_golang_migrate_up_files_only(tmp_path, capsys):
    """golang-migrate: .up.sql files only, each a multi-statement query like Prisma's."""
    write(tmp_path, {
        "1_index.up.sql": CONCURRENT,
        "1_index.down.sql": "DROP TABLE orders;\n",
    })
    code, found, runner = run(capsys, str(tmp_path))
    assert (runner, found, code) == ("golang-migrate", [], 0)


def test_flyway_order_and_execute_in_transaction(tmp_path, capsys):
    """Flyway: V2 runs before V10 (the type known from V2), and a header can turn off the
    transaction."""
    write(tmp_path, {
        "V2__create.sql": "CREATE TABLE users (id bigint PRIMARY KEY, name varchar(50));\n",
        "V10__widen.sql": TIMEOUT + "ALTER TABLE users ALTER COLUMN name TYPE text;\n",
        "V11__index.sql": "-- flyway:executeInTransaction=false\n" + CONCURRENT,
    })
    code, found, runner = run(capsys, str(tmp_path))
    assert (runner, found, code) == ("flyway", [], 0)


def test_flyway_runs_concurrently_scripts_outside_a_transaction(tmp_path, capsys):
    """Flyway's parser spots CREATE [UNIQUE] INDEX CONCURRENTLY, DROP INDEX CONCURRENTLY,
    VACUUM, ... and runs that script without a transaction: no false alarm there; a script
    that keeps its transaction by header (or only mentions the word) is still reported."""
    write(tmp_path, {
        "V1__create.sql": "CREATE TABLE orders (id bigint PRIMARY KEY, status text);\n",
        "V2__index.sql": "CREATE UNIQUE INDEX CONCURRENTLY o_s ON orders (status);\n"
                         "DROP INDEX CONCURRENTLY IF EXISTS o_old;\n",
        "V3__forced.sql": "-- flyway:executeInTransaction=true\n" + TIMEOUT + CONCURRENT,
        "V4__comment.sql": TIMEOUT + "-- CREATE INDEX CONCURRENTLY comes later\n"
                           "COMMENT ON TABLE orders IS 'concurrently';\n",
        # a mix (a SET is one too): Flyway refuses it (mixed=false by default); judged in a
        # transaction
        "V5__mixed.sql": TIMEOUT + "ALTER TABLE orders ADD COLUMN x int;\n" + CONCURRENT,
    })
    code, found, runner = run(capsys, str(tmp_path))
    assert (runner, found, code) == ("flyway", [
        ("V3__forced.sql", "concurrently-in-transaction"),
        ("V5__mixed.sql", "concurrently-in-transaction")], 1)


def test_runner_without_timeouts_needs_lock_timeout(tmp_path, capsys):
    """Only pgsteady migrate sets lock_timeout itself: under prisma a bare ALTER is reported."""
    write(tmp_path, {"migration_lock.toml": "",
                     "20240101000000_a/migration.sql": "ALTER TABLE users ADD COLUMN x int;\n"})
    _, found, _ = run(capsys, str(tmp_path))
    assert found == [("20240101000000_a", "require-lock-timeout"),
                     ("20240101000000_a", "require-statement-timeout")]
    _, found, _ = run(capsys, "--tool", "pgsteady", str(tmp_path / "20240101000000_a"))
    assert found == []


def test_sqitch_deploy_only_and_its_own_begin(tmp_path, capsys):
    """sqitch: deploy/ scripts carry their own BEGIN/COMMIT; revert/ is not linted."""
    write(tmp_path, {
        "sqitch.plan": "%project=app\n",
        "deploy/index.sql": CONCURRENT,
        "deploy/users.sql": "BEGIN;\n" + TIMEOUT + CONCURRENT + "COMMIT;\n",
        "revert/users.sql": "DROP TABLE users;\n",
    })
    _, found, runner = run(capsys, str(tmp_path))
    assert runner == "sqitch"
    assert found == [("users.sql", "concurrently-in-transaction")]


def test_plain_and_alembic_sql(tmp_path, capsys):
    """plain (psql -f) autocommits; alembic --sql output is detected and its BEGIN counts."""
    write(tmp_path, {"a.sql": CONCURRENT,
                     "upgrade.sql": "BEGIN;\nCREATE TABLE alembic_version (v text);\n"
                                    + TIMEOUT + CONCURRENT + "COMMIT;\n"})
    _, found, runner = run(capsys, "--tool", "plain", str(tmp_path / "a.sql"))
    assert (runner, found) == ("plain", [])
    _, found, runner = run(capsys, str(tmp_path / "upgrade.sql"))
    assert runner == "alembic-sql"
    assert found == [("upgrade.sql", "concurrently-in-transaction")]


def test_runner_from_config_and_text_summary_names_it(tmp_path, monkeypatch, capsys):
    """`runner = "goose"` in [tool.pgsteady.lint] is used, and the text summary says so."""
    write(tmp_path, {"pyproject.toml": '[tool.pgsteady.lint]\nrunner = "goose"\n',
                     "m/1_a.sql": "-- +goose NO TRANSACTION\n-- +goose Up\n" + CONCURRENT})
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--no-cache", "m/1_a.sql"]) == 0
    assert "runner profile goose (from config)" in capsys.readouterr().err


def test_unknown_runner_is_a_usage_error(tmp_path, capsys):
    """A misspelled runner exits 2 naming the profiles."""
    (tmp_path / "a.sql").write_text("SELECT 1;\n")
    assert main(["lint", "--tool", "gose", str(tmp_path / "a.sql")]) == 2
    assert "no runner profile 'gose'; use one of pgsteady, prisma" in capsys.readouterr().err


@pytest.mark.parametrize(("runner", "header"), [
    ("pgsteady", ""), ("flyway", "-- flyway:executeInTransaction=true\n")])
def test_in_transaction_runners_still_flag_concurrently(tmp_path, capsys, runner, header):
    """Control: where the runner does wrap the file, CONCURRENTLY is still reported (Flyway
    wraps a CONCURRENTLY script only when told to: see the Flyway test above)."""
    (tmp_path / "V1__a.sql").write_text(header + CONCURRENT)
    _, found, _ = run(capsys, "--tool", runner, str(tmp_path / "V1__a.sql"))
    assert found == [("V1__a.sql", "concurrently-in-transaction")]


def test_popx_nontx_name_and_other_dialects(tmp_path, capsys):
    """popx (ory): an `.autocommit.` name runs outside a transaction; MySQL/SQLite files are
    skipped; a version's postgres file replaces its generic one."""
    write(tmp_path, {
        "20240101000001000000_index.autocommit.up.sql": CONCURRENT,
        "20240101000004000000_y.up.sql": "ALTER TABLE t ADD COLUMN c int CHECK (c > 0);\n",
        "20240101000004000000_y.postgres.up.sql": TIMEOUT + "ALTER TABLE t ADD COLUMN c int;\n",
        "20240101000002000000_index.postgres.up.sql": CONCURRENT,
        "20240101000003000000_x.mysql.up.sql": "ALTER TABLE t MODIFY c int;\n",
        "20240101000003000000_x.sqlite3.up.sql": "PRAGMA foreign_keys = off;\n",
        "20240101000001000000_index.down.sql": "DROP INDEX orders_status;\n",
    })
    code, found, runner = run(capsys, str(tmp_path))
    assert runner == "popx"
    assert found == [("20240101000002000000_index.postgres.up.sql",
                      "concurrently-in-transaction")] and code == 1


def test_popx_runs_each_file_in_a_transaction_unless_autocommit(tmp_path, capsys):
    """popx wraps every file not named `.autocommit.` in a transaction (its Runner), so a lone
    CREATE INDEX CONCURRENTLY there fails at deploy; in an `.autocommit.` file (either place
    popx reads it) it is fine."""
    write(tmp_path, {
        "20240101000001000000_lone.up.sql": CONCURRENT,
        "20240101000001000000_lone.down.sql": "DROP INDEX orders_status;\n",
        "20240101000002000000_lone.postgres.up.sql": CONCURRENT,
        "20240101000002000000_lone.postgres.down.sql": "SELECT 1;\n",
        "20240101000003000000_ok.autocommit.up.sql": CONCURRENT,
        "20240101000003000000_ok.autocommit.down.sql": "SELECT 1;\n",
        "20240101000004000000_ok.postgres.autocommit.up.sql": CONCURRENT,
        "20240101000004000000_ok.postgres.autocommit.down.sql": "SELECT 1;\n",
    })
    code, found, runner = run(capsys, str(tmp_path))
    assert runner == "popx" and code == 1
    assert found == [("20240101000001000000_lone.up.sql", "concurrently-in-transaction"),
                     ("20240101000002000000_lone.postgres.up.sql",
                      "concurrently-in-transaction")]
    for name in ("20240101000001000000_lone.up.sql", "20240101000003000000_ok.autocommit.up.sql"):
        _, found, runner = run(capsys, str(tmp_path / name))  # a file alone: the same profile
        assert runner == "popx" and bool(found) == ("lone" in name)


def test_json_summary_names_every_file_popx_and_golang_migrate_skip(tmp_path, capsys):
    """--format json's summary.skipped names each .sql file of a popx or golang-migrate folder
    that was not linted, with why: down scripts, other databases' files, a generic file its
    PostgreSQL one replaces, names the tool does not run."""
    popx = write(tmp_path / "popx", {
        "20240101000001000000_a.up.sql": "SELECT 1;\n",
        "20240101000001000000_a.postgres.up.sql": "SELECT 2;\n",
        "20240101000001000000_a.down.sql": "SELECT 3;\n",
        "20240101000001000000_a.mysql.up.sql": "SELECT 4;\n",
        "20240101000002000000_b.sqlite3.autocommit.up.sql": "SELECT 5;\n",
        "20240101000002000000_b.autocommit.up.sql": "SELECT 6;\n",
        "20240101000002000000_b.autocommit.down.sql": "SELECT 7;\n",
        "legacy/20190101000000_c.cockroach.up.sql": "SELECT 8;\n",
    })
    golang = write(tmp_path / "golang", {
        "1_a.up.sql": "SELECT 1;\n", "1_a.down.sql": "SELECT 2;\n",
        "2_b.up.sql": "SELECT 3;\n", "2_b.down.sql": "SELECT 4;\n", "seed.sql": "SELECT 5;\n",
    })
    for folder, runner, linted in ((popx, "popx", 2), (golang, "golang-migrate", 2)):
        main(["lint", "--no-cache", "--format", "json", str(folder)])
        summary = json.loads(capsys.readouterr().out)["summary"]
        assert summary["runner"] == runner and summary["files"] == linted
        skipped = {Path(s["path"]).relative_to(folder).as_posix(): s["reason"]
                   for s in summary["skipped"]}
        listed = {p.relative_to(folder).as_posix() for p in folder.rglob("*.sql")}
        assert len(skipped) == len(listed) - linted == len(summary["skipped"])
        if runner == "popx":
            assert skipped == {
                "20240101000001000000_a.up.sql": "20240101000001000000_a.postgres.up.sql runs "
                                                 "instead (this version's PostgreSQL file)",
                "20240101000001000000_a.down.sql": "a down script beside its up script: it "
                                                   "runs on a rollback",
                "20240101000001000000_a.mysql.up.sql": "for mysql: popx runs it on that "
                                                       "database only",
                "20240101000002000000_b.sqlite3.autocommit.up.sql": "for sqlite3: popx runs "
                                                                    "it on that database only",
                "20240101000002000000_b.autocommit.down.sql": "a down script beside its up "
                                                              "script: it runs on a rollback",
                "legacy/20190101000000_c.cockroach.up.sql": "for cockroach: popx runs it on "
                                                            "that database only"}
    assert skipped == {
        "1_a.down.sql": "a down script beside its up script: it runs on a rollback",
        "2_b.down.sql": "a down script beside its up script: it runs on a rollback",
        "seed.sql": "golang-migrate runs only <version>_<name>.up.sql"}


def test_help_lists_every_profile():
    """--help names the same profiles the runners module knows."""
    from pgsteady.cli.lint import PROFILES
    from pgsteady.lint.runners import NAMES

    assert PROFILES.split(", ") == list(NAMES)


def test_down_scripts_beside_up_scripts_are_skipped_in_a_folder(tmp_path, capsys):
    """diesel/Hasura (<dir>/up.sql + down.sql) and V1.x.up.sql + V1.x.down.sql folders: only the
    up scripts are linted and replayed (a down replayed first would have dropped the column
    the up adds), the summary says how many were skipped; a down script with no up beside it,
    or named on the command line, is linted."""
    write(tmp_path, {
        "2020-01-01-000000_users/up.sql": "CREATE TABLE users (id bigint PRIMARY KEY);\n",
        "2020-01-01-000000_users/down.sql": "DROP TABLE users;\n",
        "2020-02-01-000000_email/up.sql": "ALTER TABLE users ADD COLUMN email text;\n",
        "2020-02-01-000000_email/down.sql": "ALTER TABLE users DROP COLUMN email;\n",
        "V0003.Pin.up.sql": "ALTER TABLE users ADD COLUMN pin integer;\n",
        "V0003.Pin.down.sql": "ALTER TABLE users DROP COLUMN pin;\n",
        "V0004.Lonely.down.sql": "ALTER TABLE users DROP COLUMN pin;\n",
    })
    code, found, _ = run(capsys, "--tool", "pgsteady", str(tmp_path))
    assert (code, found) == (1, [("V0004.Lonely.down.sql", "ban-drop-column")])
    assert main(["lint", "--no-cache", "--tool", "pgsteady", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "in 4 files" in err and "skipped 3 down scripts beside their up scripts" in err
    # detected, the folder is Diesel's: the files beside its folders are named, not linted
    main(["lint", "--no-cache", str(tmp_path)])
    err = capsys.readouterr().err
    assert "in 2 files" in err and "runner profile diesel" in err
    assert "skipped 3 .sql files diesel does not run as SQL (V0003.Pin.down.sql, V0003.Pin.up.sql, " \
           "V0004.Lonely.down.sql): name one to lint it" in err
    down = str(tmp_path / "V0003.Pin.down.sql")
    _, found, _ = run(capsys, "--tool", "pgsteady", down)
    assert found == [("V0003.Pin.down.sql", "ban-drop-column")]


def test_summary_counts_one_statement_in_the_singular(tmp_path, capsys):
    """One file holding one statement: "1 file, 1 statement"."""
    (tmp_path / "a.sql").write_text("SELECT 1;\n")
    assert main(["lint", "--no-cache", str(tmp_path / "a.sql")]) == 0
    assert "in 1 file, 1 statement;" in capsys.readouterr().err


def test_a_folder_walk_puts_version_folders_in_version_order(tmp_path, capsys):
    """v1.2/ runs before v1.10/ (Temporal's schema folders), so the replayed schema knows the
    column's old type when v1.10 changes it; sorted as text, v1.10 would come first and the
    finding could only guess ("no rewrite only if it already is ...")."""
    write(tmp_path, {
        "v1.2/a.sql": "CREATE TABLE t (id bigint PRIMARY KEY, pin integer);\n",
        "v1.10/b.sql": "ALTER TABLE t ALTER COLUMN pin TYPE bigint;\n",
    })
    code = main(["lint", "--no-cache", "--format", "json", "--tool", "pgsteady",
                 str(tmp_path)])
    document = json.loads(capsys.readouterr().out)
    assert code == 1
    (finding,) = document["findings"]
    assert finding["rule"] == "changing-column-type"
    assert "from int4 to int8" in finding["message"]


def test_template_placeholders_are_read_as_names(tmp_path, capsys):
    """A golang-migrate folder written as Go templates ({{ index .Options "Namespace" }}, as
    pop/fizz projects do) and a Flyway one with ${schema}: every statement parses, the rules
    apply, findings show the placeholder, and the summary counts what was filled in."""
    write(tmp_path / "go", {
        "1_users.up.sql": 'CREATE TABLE {{ index .Options "Namespace" }}.users (id bigint);\n',
        "2_index.up.sql": 'CREATE INDEX users_id ON {{ index .Options "Namespace" }}.users'
                          " (id);\n",
    })
    write(tmp_path / "fly", {"V1__a.sql": "ALTER TABLE ${schema}.orders DROP COLUMN note;\n"})
    code = main(["lint", "--no-cache", "--format", "json", str(tmp_path / "go")])
    document = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [(f["rule"], f["table"]) for f in document["findings"]
            if not f["rule"].endswith("-timeout")] == [
        ("require-concurrent-index-creation", "{{namespace}}.users")]
    assert main(["lint", "--no-cache", str(tmp_path / "fly")]) == 1
    captured = capsys.readouterr()
    assert "ban-drop-column" in captured.out and "({{schema}}.orders.note)" in captured.out
    assert "read 1 template placeholder ({{ }}, ${}) as names" in captured.err


def test_goose_go_migrations_are_named_not_linted(tmp_path, capsys):
    """goose runs <version>_<name>.go migrations as code: lint skips them and says so (it
    refused the whole folder: 'no -- +goose Up annotation' in the .go file)."""
    write(tmp_path, {"001_t.sql": "-- +goose Up\nCREATE TABLE t (a int);\n",
                     "002_backfill.go": "package migrations\n",
                     "003_idx.sql": "-- +goose Up\n" + TIMEOUT + "CREATE INDEX i ON t (a);\n"})
    assert main(["lint", "--no-cache", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "003_idx.sql:4:1 require-concurrent-index-creation" in captured.out
    assert "skipped 1 file goose does not run as SQL (002_backfill.go)" in captured.err


@pytest.mark.parametrize("header", ["", "-- +goose Up\n"])
def test_a_detected_folder_is_read_once(tmp_path, capsys, monkeypatch, header):
    """Detection reads small files whole; linting uses those reads instead of opening each
    file again (plain folders and tool layouts alike), and lints the same."""
    write(tmp_path, {f"{n:04d}_step.sql": header + "ALTER TABLE t ADD COLUMN c int NOT NULL;\n"
                     for n in range(1, 6)})
    before = run(capsys, str(tmp_path))
    opened: list[str] = []
    real_open = Path.open
    real_read = Path.read_bytes

    def spy_open(self: Path, *args: object, **kwargs: object):
        opened.append(self.name)
        return real_open(self, *args, **kwargs)

    def spy_read(self: Path) -> bytes:
        opened.append(self.name)
        return real_read(self)

    monkeypatch.setattr(Path, "open", spy_open)
    monkeypatch.setattr(Path, "read_bytes", spy_read)
    assert run(capsys, str(tmp_path)) == before
    assert sorted(n for n in opened if n.endswith(".sql")) == [
        f"{n:04d}_step.sql" for n in range(1, 6)]
    assert sum(rule == "adding-required-field" for _, rule in before[1]) == 5


def test_json_summary_lists_skipped_files(tmp_path, capsys):
    """What a folder holds but lint did not check is listed, with why, in the JSON summary
    (the text summary only counts it), the same from the warm cache."""
    write(tmp_path / "goose", {"001_t.sql": "-- +goose Up\nCREATE TABLE t (a int);\n",
                               "002_backfill.go": "package migrations\n"})
    write(tmp_path / "plain", {"V1.a.up.sql": "CREATE TABLE a (id int);\n",
                               "V1.a.down.sql": "DROP TABLE a;\n"})
    expected = {
        "goose": [{"path": str(tmp_path / "goose" / "002_backfill.go"),
                   "reason": "goose does not run it as SQL"}],
        "plain": [{"path": str(tmp_path / "plain" / "V1.a.down.sql"),
                   "reason": "a down script beside its up script: it runs on a rollback"}],
    }
    for folder, skipped in expected.items():
        for cache in (["--no-cache"], ["--cache-dir", str(tmp_path / "c")],
                      ["--cache-dir", str(tmp_path / "c")]):
            main(["lint", *cache, "--format", "json", str(tmp_path / folder)])
            summary = json.loads(capsys.readouterr().out)["summary"]
            assert summary["skipped"] == skipped, (folder, cache)


def test_skipped_flyway_scripts_say_why(tmp_path, capsys):
    """A Flyway baseline script is listed with Flyway's reason, not as a file the tool 'does
    not run as SQL' (eclipse-hawkbit/hawkbit's POSTGRESQL folder holds
    B1_20_0__1.0.0_baseline__POSTGRESQL.sql beside its V scripts); a repeatable script, which
    Flyway runs after the versioned ones, is linted."""
    write(tmp_path, {"B1_20_0__baseline.sql": "CREATE TABLE sp_lock (id int);\n",
                     "V1_20_1__lock.sql": "ALTER TABLE sp_lock ADD COLUMN c int;\n",
                     "R__views.sql": "CREATE OR REPLACE VIEW v AS SELECT 1;\n"})
    main(["lint", "--no-cache", "--format", "json", str(tmp_path)])
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["runner"] == "flyway"
    reasons = {Path(s["path"]).name: s["reason"] for s in summary["skipped"]}
    assert set(reasons) == {"B1_20_0__baseline.sql"}
    for reason in reasons.values():
        assert "undo or baseline" in reason, reason
    assert summary["files"] == 2, summary


@pytest.mark.parametrize("mark", ["Cargo.toml", "no-transaction"])
def test_a_sqlx_folder_is_judged_as_sqlx_runs_it(tmp_path, capsys, mark):
    """A sqlx folder (a crate's Cargo.toml beside it, or a file with sqlx's
    `-- no-transaction` first line) is read as sqlx's: sqlx sets no timeouts, so a table
    lock without lock_timeout is reported (the pgsteady profile hid it)."""
    crate = write(tmp_path, {"Cargo.toml": "[package]\nname = 'app'\n"} if mark == "Cargo.toml"
                  else {})
    files = {"migrations/20240101000001_add.sql": "ALTER TABLE orders ADD COLUMN note text;\n"}
    if mark == "no-transaction":
        files["migrations/20240101000002_index.sql"] = "-- no-transaction\n" + CONCURRENT
    write(crate, files)
    _, found, runner = run(capsys, str(crate / "migrations"))
    assert runner == "sqlx"
    assert ("20240101000001_add.sql", "require-lock-timeout") in found
    assert not any(name.endswith("_index.sql") and rule == "concurrently-in-transaction"
                   for name, rule in found)


@pytest.mark.parametrize("mark", ["fizz", "database.yml"])
def test_a_pop_folder_is_judged_as_pop_runs_it(tmp_path, capsys, mark):
    """gobuffalo/pop runs each migration in a transaction: a pop folder (its .fizz files, or
    pop's database.yml beside it) without dialect names is not read as golang-migrate's
    (one implicit transaction, a lone statement outside it), and the summary says why."""
    files = {"migrations/20240101000001_index.up.sql": CONCURRENT,
             "migrations/20240101000001_index.down.sql": "DROP INDEX orders_status;\n"}
    files.update({"migrations/20240101000000_orders.up.fizz": 'create_table("orders") {}\n'}
                 if mark == "fizz" else {"database.yml": "development:\n  dialect: postgres\n"})
    write(tmp_path, files)
    code = main(["lint", "--no-cache", str(tmp_path / "migrations")])
    err = capsys.readouterr().err
    assert "runner profile popx (pop (gobuffalo)" in err, err
    assert "each file in a transaction" in err
    _, found, runner = run(capsys, str(tmp_path / "migrations"))
    assert runner == "popx"
    assert ("20240101000001_index.up.sql", "concurrently-in-transaction") in found
    assert code == 1


def test_a_golang_migrate_guess_says_why(tmp_path, capsys):
    """A folder of bare up/down names is guessed as golang-migrate's, and the summary says it
    was a guess from names other tools share."""
    write(tmp_path, {"1_a.up.sql": "SELECT 1;\n", "1_a.down.sql": "SELECT 1;\n"})
    main(["lint", "--no-cache", str(tmp_path)])
    err = capsys.readouterr().err
    assert "runner profile golang-migrate" in err and "guessed from" in err, err


def test_a_statement_after_the_commit_of_a_one_query_file_is_reported(pgsteady_database,
                                                                      tmp_path, capsys):
    """Sent as one query (Prisma), a file whose block's COMMIT has statements after it is not
    atomic (the server keeps the block when a later statement fails): reported, where the
    same file without the trailing statement is not."""
    block = "BEGIN;\nCREATE TABLE kept (id int);\nCOMMIT;\n"
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute(block + "SELECT 1 / 0;\n")  # one multi-statement query
        assert conn.execute("SELECT to_regclass('kept') IS NOT NULL").fetchone()[0]
    write(tmp_path, {"migration_lock.toml": "",
                     "20240101000000_a/migration.sql": block + "ALTER TABLE kept ADD b int;\n",
                     "20240102000000_b/migration.sql": block})
    _, found, runner = run(capsys, "--exclude", "require-lock-timeout,require-statement-timeout",
                           str(tmp_path))
    assert runner == "prisma"
    assert found == [("20240101000000_a", "transaction-nesting")]
