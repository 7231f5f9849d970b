"""Renderers: text with help lines, colour only when asked, JSON keys, GitHub annotations."""

from __future__ import annotations

import json

from pgsteady.lint import output
from pgsteady.lint.engine import Linter, LintReport

SQL = "SELECT 1;\nCREATE INDEX i ON t (a);\nALTER TABLE t ADD COLUMN j json;\n"


def report(sql: str = SQL, path: str = "db/001.sql") -> LintReport:
    return LintReport([Linter().lint_text(sql, path)])


def test_text_is_location_rule_message_then_help():
    """Each finding is `file:line:col rule-id message` followed by an indented help line."""
    lines = output.render_text(report()).splitlines()
    assert lines[0].startswith("db/001.sql:2:1 require-concurrent-index-creation CREATE INDEX")
    assert lines[1].startswith("  help: ") and "CONCURRENTLY" in lines[1]
    assert lines[2].startswith("db/001.sql:3:28 prefer-jsonb ")
    assert "\x1b[" not in "\n".join(lines)


def test_text_colour_only_when_asked():
    """ANSI colour codes appear only with color=True."""
    assert "\x1b[1;31m" in output.render_text(report(), color=True)


def test_clean_report_renders_nothing():
    """No findings, no text (the summary goes to stderr, not here)."""
    assert output.render_text(report("SELECT 1;")) == ""


def test_json_has_schema_version_and_stable_keys():
    """The JSON document carries schema_version, a summary and the same keys per finding."""
    document = json.loads(output.render_json(report()))
    assert document["schema_version"] == output.SCHEMA_VERSION
    assert document["summary"] == {"files": 1, "statements": 3, "errors": 2, "warnings": 0,
                                   "syntax_errors": 0, "exit_code": 1, "runner": None,
                                   "skipped": []}
    assert list(document["findings"][0]) == ["path", "line", "column", "rule", "severity",
                                             "message", "help", "table", "rows",
                                             "size_bytes", "lock"]
    assert document["findings"][0]["table"] == "t"


def test_json_lists_syntax_errors():
    """A file that does not parse appears under syntax_errors with its position."""
    document = json.loads(output.render_json(report("SELEC 1;", "x.sql")))
    assert document["syntax_errors"] == [
        {"path": "x.sql", "line": 1, "column": 1, "message": 'syntax error at or near "SELEC"'}]
    assert document["summary"]["exit_code"] == 2


def test_github_annotations_escape_their_fields():
    """One ::error line per finding; commas, colons and newlines are escaped as GitHub wants."""
    text = output.render_github(report(path="db/a,b:c.sql"))
    lines = text.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("::error file=db/a%2Cb%3Ac.sql,line=2,col=1,"
                               "title=require-concurrent-index-creation::")
    assert "%0Ahelp: " in lines[0]


def test_summary_counts_errors_and_warnings():
    """The summary line counts findings by severity, files and statements."""
    assert output.summary(report()) == "2 findings (2 errors, 0 warnings) in 1 file, 3 statements"
