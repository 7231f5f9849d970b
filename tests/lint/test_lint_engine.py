"""The engine: positions, syntax errors, ignore comments, and what squawk gets wrong."""

from __future__ import annotations

import pytest

from pgsteady.errors import UsageError
from pgsteady.lint.config import LintConfig
from pgsteady.lint.engine import Linter, LintReport, Unit, collect_files, lint_paths


def rules_of(sql: str, **config) -> list[str]:
    report = Linter(LintConfig(**config)).lint_text(sql)
    assert report.syntax_error is None, report.syntax_error
    return [f.rule for f in report.findings]


def test_finding_position_is_line_and_column_of_the_statement():
    """A finding points at the statement's first word, after comments and blank lines."""
    sql = "-- header\n\nSELECT 1;\n  /* why */ CREATE INDEX i ON t (a);\n"
    (finding,) = Linter().lint_text(sql, "m.sql").findings
    assert (finding.path, finding.line, finding.col) == ("m.sql", 4, 13)


def test_a_nested_comment_before_a_statement_is_skipped_whole():
    """PostgreSQL nests /* */ comments: the finding points past the outer comment's end."""
    sql = "SELECT 1;\n/* a /* b */ c */ CREATE INDEX i ON t (x);\n"
    (finding,) = Linter().lint_text(sql).findings
    assert (finding.line, finding.col) == (2, 19)


def test_column_counts_characters_not_bytes():
    """After multi-byte text on the same line, the column is still in characters."""
    sql = "SELECT 'ééé'; ALTER TABLE t ADD COLUMN j json;\n"
    (finding,) = Linter().lint_text(sql).findings
    assert finding.rule == "prefer-jsonb"
    assert (finding.line, finding.col) == (1, sql.index("json;") + 1)


def test_syntax_error_has_line_column_and_parser_message():
    """A statement that does not parse is reported at file:line:col with the parser's words."""
    report = Linter().lint_text("SELECT 1;\nALTER TABLE t ADD COLUMN;\n", "bad.sql")
    problem = report.syntax_error
    assert problem is not None and not report.findings
    assert str(problem) == 'bad.sql:2:25: syntax error at or near ";"'


def test_syntax_error_at_end_of_input_points_after_the_text():
    """An unfinished statement is reported where the text ends."""
    problem = Linter().lint_text("SELECT (1\n").syntax_error
    assert problem is not None
    assert (problem.line, problem.col, problem.message) == (1, 10, "syntax error at end of input")


def test_nul_character_is_a_syntax_error_not_silently_truncated():
    """The C parser stops at NUL; the linter reports it instead of ignoring what follows."""
    problem = Linter().lint_text("SELECT 1;\x00DROP TABLE t;").syntax_error
    assert problem is not None and "NUL" in problem.message


def test_file_that_is_not_utf8_is_reported_with_position(tmp_path):
    """Bytes that are not UTF-8 give a syntax problem at their line, not a traceback."""
    path = tmp_path / "latin1.sql"
    path.write_bytes(b"SELECT 1;\nSELECT '\xe9';\n")
    problem = Linter().lint_file(path).syntax_error
    assert problem is not None and (problem.line, problem.col) == (2, 9)


def test_empty_and_comment_only_files_are_clean():
    """No statements, no findings, no error."""
    for sql in ("", "   \n", "-- nothing yet\n/* later */\n"):
        report = Linter().lint_text(sql)
        assert report.syntax_error is None and not report.findings and report.statements == 0


def test_squawk_misses_are_reported():
    """LOCK TABLE, a whole-table UPDATE, json columns and VACUUM FULL are all flagged."""
    sql = """
        LOCK TABLE users IN ACCESS EXCLUSIVE MODE;
        UPDATE users SET plan = 'free';
        ALTER TABLE users ADD COLUMN settings json;
        VACUUM FULL users;
    """
    assert rules_of(sql) == ["ban-lock-table", "whole-table-write", "prefer-jsonb",
                             "ban-vacuum-full"]


def test_squawk_false_positives_are_not_raised():
    """varchar -> text is no rewrite; ADD PRIMARY KEY is never told to use NOT VALID."""
    history = [Unit("0001.sql", "CREATE TABLE users (id bigint, name varchar(50));")]
    report = Linter().lint_units([Unit("0002.sql", "ALTER TABLE users ALTER COLUMN name TYPE text;")],
                                 history=history)
    assert report.findings == []
    findings = Linter().lint_text("ALTER TABLE users ADD PRIMARY KEY (id);").findings
    assert [f.rule for f in findings] == ["require-unique-using-index"]
    assert "NOT VALID" not in findings[0].help
    assert "USING INDEX" in findings[0].help


def test_tables_created_in_the_same_file_are_not_lock_risks():
    """Indexes, constraints and backfills on a table made earlier in the file are fine."""
    sql = """
        CREATE TABLE invoices (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, n int);
        CREATE INDEX invoices_n ON invoices (n);
        ALTER TABLE invoices ADD CONSTRAINT n_positive CHECK (n > 0);
        UPDATE invoices SET n = 1;
    """
    assert rules_of(sql) == []


def test_runner_timeouts_silence_timeout_rules_by_default():
    """Files run by pgsteady migrate need no SET lock_timeout; other runners do."""
    sql = "ALTER TABLE users ADD COLUMN nickname text;"
    assert rules_of(sql) == []
    assert rules_of(sql, assume_runner_timeouts=False) == ["require-lock-timeout",
                                                           "require-statement-timeout"]


def test_timeout_rules_skip_drops_and_renames_that_lock_no_table():
    """Dropping or renaming a function, a type, an event trigger or an empty schema locks
    only its catalogue entry, which running queries never hold: no timeout needed (supabase's
    DROP EVENT TRIGGER was reported as 'a statement that takes a table lock'). A trigger,
    an index, a view, or anything with CASCADE does lock a table."""
    for sql in ("DROP EVENT TRIGGER pgrst_watch;", "DROP FUNCTION f(int);", "DROP TYPE mood;",
                "DROP SCHEMA staging;", "ALTER FUNCTION f() RENAME TO g;",
                "ALTER TYPE mood RENAME TO feeling;"):
        assert rules_of(sql, assume_runner_timeouts=False) == [], sql
    for sql in ("DROP TRIGGER t_audit ON users;", "DROP INDEX users_email;", "DROP VIEW v;",
                "DROP FUNCTION f() CASCADE;", "ALTER INDEX i RENAME TO j;",
                "ALTER TABLE users RENAME COLUMN a TO b;"):
        assert "require-lock-timeout" in rules_of(sql, assume_runner_timeouts=False), sql


def test_timeout_rules_report_once_per_file():
    """Ten risky statements without a timeout give one finding per timeout rule, not ten."""
    sql = "ALTER TABLE users ADD COLUMN a text;\n" * 10
    assert rules_of(sql, assume_runner_timeouts=False).count("require-lock-timeout") == 1


def test_ignore_comment_silences_only_the_next_statement():
    """An ignore above a statement covers it and not the one after."""
    sql = ("-- pgsteady: ignore ban-drop-column -- unused since release 41\n"
           "ALTER TABLE users DROP COLUMN a;\n"
           "ALTER TABLE users DROP COLUMN b;\n")
    findings = Linter().lint_text(sql).findings
    assert [(f.rule, f.line) for f in findings] == [("ban-drop-column", 3)]


def test_ignore_file_silences_the_rule_everywhere():
    """ignore-file covers every statement in the file."""
    sql = ("-- pgsteady: ignore-file ban-drop-column -- cleanup release\n"
           "ALTER TABLE users DROP COLUMN a;\nALTER TABLE users DROP COLUMN b;\n")
    assert rules_of(sql) == []


def test_ignore_lists_several_rules():
    """One comment may name several rules, separated by commas or spaces."""
    sql = ("-- pgsteady: ignore ban-drop-column, prefer-jsonb -- both intended\n"
           "ALTER TABLE users DROP COLUMN a, ADD COLUMN j json;\n")
    assert rules_of(sql) == []


def test_unused_ignore_is_reported_at_the_comment():
    """An ignore that suppresses nothing is itself a finding, at the comment's position."""
    sql = "SELECT 1;\n  -- pgsteady: ignore ban-drop-column -- stale\nSELECT 2;\n"
    (finding,) = Linter().lint_text(sql).findings
    assert (finding.rule, finding.line, finding.col) == ("unused-ignore", 2, 3)
    assert "ban-drop-column" in finding.message


def test_ignore_for_a_misspelled_rule_is_reported():
    """An ignore naming no real rule says so instead of silently doing nothing."""
    findings = Linter().lint_text("-- pgsteady: ignore ban-drop-colum -- x\nSELECT 1;").findings
    assert [f.rule for f in findings] == ["unused-ignore"]
    assert "no rule `ban-drop-colum`" in findings[0].message


def test_ignore_inside_a_string_literal_is_not_a_comment():
    """Text that looks like an ignore inside a string neither suppresses nor is reported."""
    sql = ("INSERT INTO notes VALUES ('-- pgsteady: ignore ban-drop-column -- x');\n"
           "ALTER TABLE users DROP COLUMN a;\n")
    assert rules_of(sql) == ["ban-drop-column"]


def test_ignore_inside_a_multiline_statement_covers_it():
    """An ignore comment between the lines of a statement applies to that statement."""
    sql = ("ALTER TABLE users\n"
           "  -- pgsteady: ignore ban-drop-column -- unused\n"
           "  DROP COLUMN a;\n")
    assert rules_of(sql) == []


def test_ignore_of_a_disabled_rule_is_not_reported():
    """Turning a rule off in the config does not make its ignores noise."""
    sql = "-- pgsteady: ignore ban-drop-column -- x\nALTER TABLE users DROP COLUMN a;\n"
    assert rules_of(sql, disable=frozenset({"ban-drop-column"})) == []


def test_disabled_rules_do_not_run():
    """A rule in `disable` reports nothing."""
    assert rules_of("ALTER TABLE t ADD COLUMN j json;", disable=frozenset({"prefer-jsonb"})) == []


def test_warn_rules_do_not_fail_the_run():
    """A rule listed in `warn` is reported as a warning and the exit code stays 0."""
    report = Linter(LintConfig(warn=frozenset({"prefer-jsonb"}))).lint_text(
        "ALTER TABLE t ADD COLUMN j json;")
    assert [f.severity for f in report.findings] == ["warning"]
    assert LintReport([report]).exit_code == 0


def test_exit_codes_add_up_over_files():
    """0 clean, 1 with an error finding, 2 as soon as one file does not parse."""
    linter = Linter()
    clean = linter.lint_text("SELECT 1;")
    risky = linter.lint_text("VACUUM FULL t;")
    broken = linter.lint_text("SELEC 1;")
    assert LintReport([clean]).exit_code == 0
    assert LintReport([clean, risky]).exit_code == 1
    assert LintReport([risky, broken]).exit_code == 2


def test_unknown_rule_in_config_is_a_usage_error():
    """A misspelled rule id in the configuration is refused, with a suggestion."""
    with pytest.raises(UsageError, match="did you mean prefer-jsonb"):
        Linter(LintConfig(disable=frozenset({"prefer-json"})))


def test_min_pg_version_turns_rules_off_where_the_statement_does_not_exist():
    """Identity columns exist from 10: on 9.6 prefer-identity has nothing to suggest."""
    sql = "CREATE TABLE t (id serial PRIMARY KEY);"
    assert "prefer-identity" in rules_of(sql, pg_version=10, enable=frozenset({"prefer-identity"}))
    assert "prefer-identity" not in rules_of(sql, pg_version=9,
                                             enable=frozenset({"prefer-identity"}))


@pytest.mark.parametrize("pg_version", [10, 11])
def test_a_version_gate_changes_the_help_never_hides_the_lock(pg_version):
    """On 10 and 11 the three rules whose fix came later still report the table lock, each
    with a fix that major has (issue 39.8: they were off, 0 findings, exit 0)."""
    sql = ("ALTER TABLE t ALTER COLUMN n SET NOT NULL;\nREINDEX TABLE t;\n"
           "ALTER TABLE ev DETACH PARTITION ev_1;\n")
    report = Linter(LintConfig(pg_version=pg_version)).lint_text(sql)
    helps = {f.rule: f.help for f in report.findings}
    assert {"set-not-null-without-check", "require-concurrent-reindex",
            "require-concurrent-detach-partition"} <= set(helps)
    assert "PostgreSQL 12" in helps["set-not-null-without-check"]
    assert "PostgreSQL 12" in helps["require-concurrent-reindex"]
    assert "PostgreSQL 14" in helps["require-concurrent-detach-partition"]
    assert all(f.severity == "error" for f in report.findings)


def test_collect_files_walks_folders_and_refuses_missing_paths(tmp_path):
    """Folders give their .sql files in order; a missing path is a usage error."""
    (tmp_path / "b.sql").write_text("SELECT 1;")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.sql").write_text("SELECT 1;")
    (tmp_path / "notes.txt").write_text("x")
    assert [p.name for p in collect_files([str(tmp_path)])] == ["b.sql", "a.sql"]
    with pytest.raises(UsageError, match="no such file"):
        collect_files([str(tmp_path / "missing.sql")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match=r"no \.sql files"):
        collect_files([str(tmp_path / "empty")])


def test_collect_files_finds_what_rglob_finds(tmp_path):
    """Links to files count, linked folders are not entered, other names are left out: the
    same files as ``rglob("*.sql")`` filtered by ``is_file``."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "1.sql").write_text("SELECT 1;")
    (tmp_path / "a" / ".hidden.sql").write_text("SELECT 1;")
    (tmp_path / "a" / "dir.sql").mkdir()
    (tmp_path / "a" / "dir.sql" / "2.sql").write_text("SELECT 1;")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "3.sql").write_text("SELECT 1;")
    (tmp_path / "a" / "linked").symlink_to(tmp_path / "outside")
    (tmp_path / "a" / "4.sql").symlink_to(tmp_path / "outside" / "3.sql")
    (tmp_path / "a" / "gone.sql").symlink_to(tmp_path / "nothing.sql")
    (tmp_path / "a" / "5.SQL").write_text("SELECT 1;")
    expected = sorted(p for p in (tmp_path / "a").rglob("*.sql") if p.is_file())
    assert sorted(collect_files([str(tmp_path / "a")])) == expected
    assert {p.name for p in expected} == {"1.sql", ".hidden.sql", "2.sql", "4.sql"}


def test_lint_paths_lints_every_file(tmp_path):
    """lint_paths returns one report per file."""
    (tmp_path / "1.sql").write_text("VACUUM FULL t;")
    (tmp_path / "2.sql").write_text("SELECT 1;")
    report = lint_paths([str(tmp_path)])
    assert [len(f.findings) for f in report.files] == [1, 0]


def test_ignore_text_inside_a_function_body_is_not_a_comment():
    """An ignore-looking line inside a dollar-quoted body neither suppresses nor is reported."""
    sql = ("CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$\n"
           "  -- pgsteady: ignore ban-drop-column -- not a real ignore\n"
           "  SELECT 1\n$$;\n"
           "ALTER TABLE users DROP COLUMN a;\n")
    assert rules_of(sql) == ["ban-drop-column"]


def test_no_transaction_directive_lifts_the_runner_transaction():
    """pgsteady migrate's `-- pgsteady: no-transaction` header lets CONCURRENTLY through."""
    sql = "CREATE INDEX CONCURRENTLY i ON t (a);\n"
    assert rules_of(sql) == ["concurrently-in-transaction"]
    assert rules_of("-- pgsteady: no-transaction\n" + sql) == []
    assert rules_of(sql, assume_in_transaction=False) == []


def test_syntax_error_column_after_multibyte_text_is_in_characters():
    """The parser's cursor is turned into a character column even after non-ASCII text."""
    problem = Linter().lint_text("SELECT 'ééé'; SELEC 1;").syntax_error
    assert problem is not None and (problem.line, problem.col) == (1, 15)


def test_backfill_with_where_after_alter_is_reported():
    """A batched-looking UPDATE is still flagged when an earlier ALTER holds the table locked."""
    sql = ("ALTER TABLE users ADD COLUMN plan text;\n"
           "UPDATE users SET plan = 'free' WHERE plan IS NULL;\n")
    assert rules_of(sql) == ["backfill-under-lock"]
    assert rules_of(sql, assume_in_transaction=False) == []


def test_alter_subcommands_are_reported_where_they_are():
    """An ALTER TABLE's subcommands have no location in the parse tree: each finding points at
    its own subcommand (they all landed on the statement's first line, 236:1 thirteen times
    in a documenso migration), quoted, qualified and non-ASCII names included."""
    sql = ('ALTER TABLE "Doc"\n'
           "  DROP COLUMN a,\n"
           "  ALTER COLUMN b DROP NOT NULL,\n"
           "  ADD CONSTRAINT k CHECK (f(1, 2) > 0),\n"
           "  ALTER COLUMN c SET NOT NULL,\n"
           '  DROP COLUMN "é";\n'
           'ALTER TABLE public."Doc" DROP COLUMN b;\n')
    findings = Linter().lint_text(sql).findings
    assert [(f.line, f.col, f.rule) for f in findings] == [
        (2, 3, "ban-drop-column"), (3, 3, "ban-drop-not-null"),
        (4, 7, "constraint-missing-not-valid"), (5, 3, "set-not-null-without-check"),
        (6, 3, "ban-drop-column"), (7, 26, "ban-drop-column")]
    assert all((f.statement_line, f.statement_col) in ((1, 1), (7, 1)) for f in findings)
    commented = ("ALTER TABLE t ADD COLUMN a int, -- a comment\n"
                 "ALTER COLUMN b DROP NOT NULL,\n"
                 "DROP COLUMN c, /* block */ DROP COLUMN d,\n"
                 "-- whole-line comment\n"
                 "ALTER COLUMN e SET NOT NULL;\n")
    assert [(f.line, f.col) for f in Linter().lint_text(commented).findings
            if f.rule != "adding-required-field"] == [(2, 1), (3, 1), (3, 28), (5, 1)]


@pytest.mark.parametrize("sql", [
    "ALTER TABLE t DROP COLUMN a",
    'ALTER TABLE "We""ird.Name" DROP COLUMN a',
    "ALTER TABLE  audit . events\n  DROP COLUMN a",
    "ALTER TABLE ONLY public.t DROP COLUMN a",
    "ALTER TABLE IF EXISTS ONLY t DROP COLUMN a",
    "ALTER TABLE t* DROP COLUMN a",
    "ALTER TABLE t * -- inherited too\n DROP COLUMN a",
    "ALTER TABLE t /* why */ DROP COLUMN a",
    "ALTER TABLE s /* odd */ . t DROP COLUMN a",
    'ALTER TABLE U&"d\\0061t" DROP COLUMN a',
    "ALTER TABLE t_$1 DROP COLUMN a",
    "ALTER TABLE t\n-- first\n-- second\nDROP COLUMN a",
    "ALTER TABLE t --c\rDROP COLUMN\na",
])
def test_a_lone_subcommand_is_found_as_the_scanner_finds_it(sql):
    """The fast path for one-subcommand ALTERs (no scan) lands where the scanner's tokens do,
    or leaves the statement to them."""
    from pgsteady.lint import parse
    from pgsteady.lint.engine import _lone_command_start, _scanned_command_starts

    statement = next(parse.statements(sql + ";", lambda kind: True))
    assert statement.node is not None
    data = (sql + ";").encode()
    scanned = _scanned_command_starts(data, statement.node)
    lone = _lone_command_start(data.decode(), statement.node["relation"]["location"])
    assert len(scanned) == 1
    assert lone in (None, scanned[0])
    if "/* odd */" not in sql and "U&" not in sql:
        assert lone == scanned[0] == sql.index("DROP")
