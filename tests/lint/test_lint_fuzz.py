"""Random and mangled SQL never produce a traceback: a clean one-line message and exit 2."""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
from pathlib import Path

from _cases import all_cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pglast import parser as pg

from pgsteady.cli import main
from pgsteady.lint.engine import Linter
from pgsteady.lint.parse import blank_meta_commands

LINTER = Linter()
SEEDS = [p.read_text(encoding="utf-8") for p in all_cases()]
SQL_BITS = st.sampled_from([
    "(", ")", ";", "'", '"', "$$", "--", "/*", "*/", "ALTER", "TABLE", "INDEX", "CREATE",
    "CONCURRENTLY", "DROP", "NOT", "NULL", "VALID", " ", "\n", ",", "é", "\x00", "USING",
    "DEFAULT", "json", "LOCK", "VACUUM", "FULL", "-- pgsteady: ignore ", "BEGIN;", "COMMIT;",
])
FAST = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mangled_sql(draw: st.DrawFn) -> str:
    """A real case file with spans cut out, bits of SQL spliced in, or its end chopped off."""
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["cut", "insert", "truncate"]))
        if action == "cut":
            text = text[:at] + text[at + draw(st.integers(1, 12)):]
        elif action == "insert":
            text = text[:at] + draw(SQL_BITS) + text[at:]
        else:
            text = text[:at]
    return text


def parses(text: str) -> bool:
    """The oracle: PostgreSQL's parser accepts the text once psql meta-commands are skipped
    (a statement only too deep for its stack is reported as unparsed, not as an error)."""
    if "\x00" in text:
        return False
    try:
        pg.parse_sql_json(blank_meta_commands(text)[0])
    except pg.ParseError as exc:
        return "stack depth limit exceeded" in str(exc)
    except UnicodeEncodeError:
        return False
    return True


def check_report(text: str) -> None:
    report = LINTER.lint_text(text, "fuzz.sql")
    problem = report.syntax_error
    if problem is None:
        assert all(f.line >= 1 and f.col >= 1 for f in report.findings)
        return
    assert not report.findings
    assert 1 <= problem.line <= text.count("\n") + 1
    assert problem.col >= 1
    assert problem.message and "\n" not in problem.message


@FAST
@given(st.text(max_size=300))
def test_random_text_never_raises(text):
    """Any text at all gives findings or one syntax problem with a sane position."""
    check_report(text)


@FAST
@given(st.lists(SQL_BITS, max_size=40).map("".join))
def test_sql_shaped_noise_never_raises(text):
    """Keywords and punctuation in random order give findings or one syntax problem."""
    check_report(text)


@FAST
@given(mangled_sql())
def test_mangled_migrations_never_raise(text):
    """Real migrations, damaged at random, give findings or one syntax problem."""
    check_report(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(mangled_sql().map(lambda s: s.encode("utf-8")), st.binary(max_size=200)))
def test_cli_on_broken_files_exits_2_with_one_clean_line(data):
    """Through the CLI, a file that does not parse exits 2 with one `file:line:col: message`."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.sql"
        path.write_bytes(data)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["lint", str(path)])
    try:
        text = data.decode("utf-8-sig")
        broken = not parses(text)
    except UnicodeDecodeError:
        broken = True
    assert "Traceback" not in err.getvalue()
    if broken:
        assert code == 2
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        assert re.match(rf"^{re.escape(str(path))}:\d+:\d+: \S", lines[0])
        assert len(lines) == 2  # the problem, then the summary
    else:
        assert code in (0, 1)
