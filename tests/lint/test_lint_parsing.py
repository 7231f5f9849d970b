"""Robust parsing: deep statements, psql meta-commands, missing ';' hints, DO blocks."""

from __future__ import annotations

from functools import partial

from pgsteady.lint.engine import Linter


def found(sql: str) -> list[tuple[int, str, str]]:
    """(line, rule, severity) of every finding; the text must parse."""
    report = Linter().lint_text(sql, "m.sql")
    assert report.syntax_error is None, report.syntax_error
    return [(f.line, f.rule, f.severity) for f in report.findings]


def test_deeply_nested_valid_sql_keeps_the_other_findings():
    """200 nested CASEs, 1,000 || and 200-deep subqueries lint; the VACUUM FULL is still found."""
    case = "CASE WHEN a > 1 THEN " * 200 + "1" + " END" * 200
    concat = " || ".join(["'a'"] * 1000)
    subquery = "SELECT * FROM " + "(SELECT * FROM " * 200 + "t" + ") x" * 200
    sql = (f"UPDATE t SET v = {case} WHERE id = 1;\n"
           f"UPDATE t SET w = {concat} WHERE id = 2;\n"
           f"DELETE FROM t WHERE id IN ({subquery});\n"
           "VACUUM FULL t;\n")
    assert found(sql) == [(4, "ban-vacuum-full", "error")]


def test_deep_statement_is_still_checked():
    """A whole-table UPDATE nested 300 CASEs deep is still reported."""
    case = "CASE WHEN a > 1 THEN " * 300 + "1" + " END" * 300
    assert (2, "whole-table-write", "error") in found(f"SELECT 1;\nUPDATE t SET v = {case};\n")


def test_parser_stack_limit_is_one_unparsed_warning_at_its_line():
    """A statement the C parser refuses as too deep is a warning at its line; the rest is linted."""
    deep = " || ".join(["'a'"] * 20000)
    sql = f"SELECT 1;\n\nINSERT INTO t VALUES ({deep});\nVACUUM FULL t;\n"
    assert found(sql) == [(3, "unparsed-statement", "warning"), (4, "ban-vacuum-full", "error")]


def test_long_files_read_the_same_as_short_ones():
    """A file long enough for the fast path (parsed ahead on a thread, decoded by orjson) is
    linted exactly as its statements are one by one, deep statements included: one past
    orjson's nesting limit (decoded on the big-stack path), one past the standard scanner's."""
    from pgsteady.lint import parse

    deep = "CASE WHEN a > 1 THEN " * 300 + "1" + " END" * 300
    deeper = "SELECT * FROM " + "(SELECT * FROM " * 200 + "t" + ") x" * 200
    body = [f"ALTER TABLE t{i % 7} ADD COLUMN c{i} int NOT NULL DEFAULT {i};" for i in range(600)]
    body[100] = f"UPDATE t SET v = {deep};"
    body[300] = f"DELETE FROM t WHERE id IN ({deeper});"
    body[500] = "VACUUM FULL t;"
    sql = "\n".join(body) + "\n"
    assert len(body) >= parse._THREAD_FROM
    whole = found(sql)
    alone = sorted((n + 1, rule, severity) for n, line in enumerate(body)
                   for _, rule, severity in found(line))
    # Whole, the file is one transaction: the UPDATE and DELETE of t run while it holds the
    # earlier ALTERs' ACCESS EXCLUSIVE locks on t0-t6, which only the whole file can see.
    across = [(101, "backfill-under-lock", "error"), (301, "backfill-under-lock", "error")]
    assert sorted(whole) == sorted(alone + across)
    assert (101, "whole-table-write", "error") in whole
    assert (501, "ban-vacuum-full", "error") in whole


# Statements whose ';'-ended lines are not statement ends: a region cut after one of them must
# not split the statement (strings, comments, bodies, a rule's parenthesised actions, ...).
_TRICKY = [
    "CREATE TABLE t{i} (id int);\n",
    "SELECT 'a;\nb;\n' AS x;\n",
    "CREATE FUNCTION f{i}() RETURNS int LANGUAGE plpgsql AS $$\nBEGIN\n  PERFORM 1;\n"
    "  RETURN 2;\nEND;\n$$;\n",
    "/* a comment;\n with ; inside;\n */\nALTER TABLE t ADD COLUMN c{i} int;\n",
    "CREATE RULE r{i} AS ON INSERT TO t DO ALSO (\nINSERT INTO a VALUES (1);\n"
    "INSERT INTO b VALUES (2)\n);\n",
    "SELECT 1 -- trailing;\n FROM t;\n",
    "-- just a comment;\n",
    "foo bar;\n",
    "SELECT 'é€;\n' AS ü;\n",
    "CREATE FUNCTION g{i}() RETURNS int LANGUAGE sql BEGIN ATOMIC\n SELECT 1;\n SELECT 2;\nEND;\n",
    "UPDATE t SET a = $tag$ x;\n y $tag$;\n",
    ";\n;\n",
    "SELECT E'\\';\n';\n",
    'SELECT "we;\nird" FROM t;\n',
]


def test_a_long_file_split_by_region_has_the_whole_files_pieces(monkeypatch):
    """Long files are split a region at a time on the parsing thread; wherever the regions
    are cut (inside strings, comments, bodies, a rule's actions, a lexical error), the
    pieces, or the error and its position, are those of one split of the whole file."""
    import random

    from pgsteady.lint import parse

    def pieces(split):
        try:
            return split()
        except parse.ParseFailure as failure:
            return ("failed", failure.offset, failure.message)

    rng = random.Random(7)
    for trial in range(300):
        text = "".join(rng.choice(_TRICKY).format(i=i) for i in range(rng.randint(1, 80)))
        if trial % 10 == 0:
            text += "SELECT 'unterminated;\n"
        monkeypatch.setattr(parse, "_REGION", rng.choice([8, 20, 50, 120, 400]))
        monkeypatch.setattr(parse, "_FIRST_REGION", rng.choice([4, 8, 30, parse._REGION]))
        whole = pieces(partial(parse._pieces, text))
        regions = pieces(partial(lambda t: [p for b in parse._batches_by_region(t) for p in b],
                                 text))
        assert regions == whole, (parse._REGION, text)


def test_a_long_file_lints_the_same_split_by_region_or_at_once(monkeypatch):
    """The same long file, split by region (the default past a few hundred KB) or at once:
    the same findings at the same lines; a syntax error in it, at the same place."""
    from pgsteady.lint import parse

    valid = [part for part in _TRICKY if not part.startswith("foo")]
    body = "".join(part.format(i=i) for i in range(600) for part in (
        valid[i % len(valid)], f"ALTER TABLE t ADD COLUMN k{i} int NOT NULL DEFAULT 1;\n"))
    body += "VACUUM FULL t;\n"
    monkeypatch.setattr(parse, "_REGION", 2000)  # regions of a real size cut this 28 times
    monkeypatch.setattr(parse, "_FIRST_REGION", 500)
    monkeypatch.setattr(parse, "_REGIONS_FROM", 3 * parse._REGION)
    assert len(body) >= 20 * parse._REGION
    for text in (body, body + "SELECT 'unterminated;\n"):
        by_region = Linter().lint_text(text, "m.sql")
        with monkeypatch.context() as at_once:
            at_once.setattr(parse, "_REGIONS_FROM", 10 * len(text))
            whole = Linter().lint_text(text, "m.sql")
        assert by_region.syntax_error == whole.syntax_error
        assert ([(f.line, f.col, f.rule) for f in by_region.findings]
                == [(f.line, f.col, f.rule) for f in whole.findings])
    assert by_region.syntax_error is not None
    assert "unterminated" in by_region.syntax_error.message
    findings = Linter().lint_text(body, "m.sql").findings
    assert (body.count("\n"), "ban-vacuum-full") in [(f.line, f.rule) for f in findings]


def test_ok_without_the_deep_statement_bad_without_it():
    """Control: the same file without the deep statement has only the VACUUM finding."""
    assert found("SELECT 1;\nVACUUM FULL t;\n") == [(2, "ban-vacuum-full", "error")]


def test_psql_meta_commands_are_skipped_with_a_note():
    """\\set and \\connect lines are notes (warnings, exit 0); the SQL around them is linted."""
    sql = ("\\set ON_ERROR_STOP on\n\\connect app\n"
           "CREATE INDEX users_email ON users (email);\n")
    report = Linter().lint_text(sql, "m.sql")
    assert report.syntax_error is None
    assert [(f.line, f.rule) for f in report.findings] == [
        (1, "psql-meta-command"), (2, "psql-meta-command"),
        (3, "require-concurrent-index-creation")]
    assert "\\connect app" in report.findings[1].message


def test_backslash_inside_strings_is_not_a_meta_command():
    """A backslash starting a line inside a dollar-quoted string is data, not psql."""
    assert found("SELECT $$\n\\not a command$$;\n") == []


def test_missing_semicolon_is_hinted():
    """A missing ';' is reported at the next statement with a hint naming the line."""
    report = Linter().lint_text("CREATE TABLE a (id bigint PRIMARY KEY)\n\n"
                                "CREATE INDEX a_id ON a (id);\n", "m.sql")
    assert str(report.syntax_error) == ('m.sql:3:1: syntax error at or near "CREATE" '
                                        "(is a ';' missing at the end of line 1?)")


def test_other_syntax_errors_get_no_semicolon_hint():
    """A typo inside a statement is reported without the ';' hint."""
    report = Linter().lint_text("CREATE TABLE a (id bigint PRIMARY KEY);\nSELEC 1;\n", "m.sql")
    assert report.syntax_error is not None
    assert report.syntax_error.line == 2 and "missing" not in report.syntax_error.message


def test_do_block_statements_are_linted_at_their_positions():
    """ADD COLUMN, whole-table UPDATE, LOCK TABLE and DROP TABLE inside DO are reported."""
    sql = ("SELECT 1;\n"
           "DO $$\n"
           "BEGIN\n"
           "  ALTER TABLE users ADD COLUMN plan text NOT NULL;\n"
           "  UPDATE users SET plan = 'free';\n"
           "  LOCK TABLE accounts;\n"
           "  IF true THEN\n"
           "    DROP TABLE legacy;\n"
           "  END IF;\n"
           "  EXECUTE 'CREATE INDEX users_plan ON users (plan)';\n"
           "END\n"
           "$$;\n")
    assert found(sql) == [
        (4, "adding-required-field", "error"),
        (5, "backfill-under-lock", "error"),
        (5, "whole-table-write", "error"),
        (6, "ban-lock-table", "error"),
        (8, "ban-drop-table", "error"),
        (10, "require-concurrent-index-creation", "error"),
    ]


def test_harmless_do_block_is_ok():
    """A DO block that only reads or writes a few rows yields nothing."""
    assert found("DO $$ BEGIN UPDATE settings SET v = 1 WHERE k = 'x'; END $$;\n") == []


def test_do_block_that_does_not_parse_is_one_unparsed_warning():
    """A PL/pgSQL body with an error is reported as unparsed, not a file syntax error."""
    sql = "DO $$ BEGIN FOR r IN SELECT 1 LOOP DELETE FROM t; END LOOP; END $$;\n"
    assert found(sql) == [(1, "unparsed-statement", "warning")]


def test_concurrently_inside_do_block_is_in_a_transaction():
    """CREATE INDEX CONCURRENTLY inside DO fails: a DO block is one transaction."""
    sql = "DO $$ BEGIN CREATE INDEX CONCURRENTLY i ON t (a); END $$;\n"
    report = Linter().lint_text("-- pgsteady: no-transaction\n" + sql, "m.sql")
    assert "concurrently-in-transaction" in [f.rule for f in report.findings]


def test_meta_command_after_sql_on_a_line():
    """`SELECT ... \\gset` ends the statement (psql sends it); the rest of the file is linted."""
    sql = "SELECT count(*) AS n FROM t \\gset\nSELECT 'a\\b';\nCREATE INDEX i ON t (a);\n"
    assert found(sql) == [(1, "psql-meta-command", "warning"),
                          (3, "require-concurrent-index-creation", "error")]


def _parse_threads() -> list[str]:
    import threading

    return [t.name for t in threading.enumerate() if t.name == "pgsteady-lint-parse"]


def test_long_file_parse_thread_stops_on_every_exit():
    """A long file is parsed ahead on a helper thread that is gone after a full run, after a
    syntax error midway and after the reader stops early."""
    from pgsteady.lint import parse

    good = "".join(f"UPDATE t SET v = {i} WHERE id = {i};\n" for i in range(2000))
    assert len(list(parse.statements(good, lambda kind: True))) == 2000
    assert _parse_threads() == []
    broken = good[:500] + "SELEC 1;\n" + good
    report = Linter().lint_text(broken, "m.sql")
    assert report.syntax_error is not None and report.syntax_error.line == 15
    assert _parse_threads() == []
    stream = parse.statements(good, lambda kind: True)
    next(stream)
    stream.close()
    assert _parse_threads() == []


def test_grammar_depth_limit_is_unparsed_not_a_syntax_error():
    """Thousands of nested CASEs exhaust the grammar's stack: one unparsed warning."""
    case = "CASE WHEN a THEN " * 5000 + "1" + " END" * 5000
    assert found(f"SELECT {case};\nVACUUM FULL t;\n") == [
        (1, "unparsed-statement", "warning"), (2, "ban-vacuum-full", "error")]


def test_characters_python_calls_blank_but_postgresql_does_not_are_syntax_errors():
    """A lone \\x1c, or a no-break space after the last ';', is not blank to PostgreSQL: the
    file does not parse (it used to pass with 0 statements), and the error says why."""
    for text, line, col in (("\x1c", 1, 1), ("SELECT 1;\xa0\n", 1, 10),
                            ("CREATE TABLE a (id bigint);\nSELECT\xa01;\n", 2, 1)):
        error = Linter().lint_text(text, "m.sql").syntax_error
        assert error is not None, repr(text)
        assert (error.line, error.col) == (line, col), repr(text)
        assert "looks blank but PostgreSQL takes only spaces, tabs and newlines" in \
            error.message, error.message
    assert Linter().lint_text("SELECT 1;\t\f\v\r\n", "m.sql").syntax_error is None


def test_an_error_after_a_begin_atomic_body_is_reported_where_it_is():
    """The scanner cuts a BEGIN ATOMIC body at its first ';'; when the file also has a real
    error further on, that error is reported, not the valid body (it was 2:11, 'syntax error
    at end of input')."""
    atomic = ("CREATE FUNCTION g() RETURNS int LANGUAGE sql BEGIN ATOMIC\n SELECT 1;\n"
              " SELECT 2;\nEND;\n")
    error = Linter().lint_text(atomic + "SELECT 1;\nSELEC 2;\n", "m.sql").syntax_error
    assert error is not None and (error.line, error.col) == (6, 1), error
    assert 'near "SELEC"' in error.message
    assert Linter().lint_text(atomic + "SELECT 1;\n", "m.sql").syntax_error is None


_PLAIN_PARTS = [
    *(part for part in _TRICKY if part.isascii() and not part.startswith("foo")),
    "ALTER TABLE t{i} ADD COLUMN a int NOT NULL, ALTER COLUMN b SET NOT NULL ;\n",
    "ALTER TABLE \"T\".x DROP COLUMN c; -- pgsteady: ignore ban-drop-column -- ok\n",
    "-- pgsteady: ignore require-concurrent-index-creation -- small\nCREATE INDEX i{i} ON t (a);\n",
    "UPDATE t SET a = 1;  /* trailing ; comment */\n",
    "DO $$ BEGIN ALTER TABLE t ADD COLUMN d{i} int; END $$;\n",
    "CREATE TABLE p{i} (id int REFERENCES t (id), x json);\n",
    "SELECT 1\n",
    "VACUUM FULL t{i};\n",
    "-- pgsteady: ignore-file prefer-jsonb -- legacy\n",
    "-- old Mac line end\rVACUUM FULL m{i};\n",
    "-- pgsteady: ignore ban-vacuum-full -- ok\rVACUUM FULL n{i};\n",
]


def test_a_short_file_lints_the_same_parsed_whole_or_by_statement(monkeypatch):
    """A short plain file is parsed in one call (no scanner pass); the statements (where they
    start and end, their kind) and the whole lint report (findings, positions, what ignore
    comments suppress, statement positions) are those of the statement-by-statement path,
    which also takes any file the one-call path declines."""
    import random

    from pgsteady.lint import parse

    linter = Linter()

    def outcome(text: str) -> tuple[object, ...]:
        try:
            found = [(s.start, s.end, s.kind, s.node is None)
                     for s in parse.statements(text, linter._wanted)]
        except parse.ParseFailure as failure:
            found = [("failed", failure.offset, failure.message)]
        report = linter.lint_text(text, "m.sql")
        return (found, report.syntax_error, [
            (f.line, f.col, f.rule, f.message, f.statement_line, f.statement_col)
            for f in report.findings])

    rng = random.Random(11)
    whole_taken = 0
    for _ in range(400):
        text = "".join(rng.choice(_PLAIN_PARTS).format(i=i) for i in range(rng.randint(1, 12)))
        one_call = outcome(text)
        whole_taken += parse._whole(text, linter._wanted) is not None
        with monkeypatch.context() as by_statement:
            by_statement.setattr(parse, "_WHOLE_UP_TO", -1)
            assert outcome(text) == one_call, text
    assert whole_taken >= 40  # the one-call path was taken often enough to be tested
