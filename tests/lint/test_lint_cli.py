"""`pgsteady lint` on the command line: exit codes, formats, options, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pgsteady.cli import main

RISKY = "CREATE INDEX orders_status ON orders (status);\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder with a pyproject.toml and migrations/, as the current directory."""
    (tmp_path / "pyproject.toml").write_text("[tool.pgsteady.lint]\npaths = ['migrations']\n")
    (tmp_path / "migrations").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return tmp_path


def lint(*argv: str) -> int:
    return main(["lint", *argv])


def test_clean_file_exits_0(project, capsys):
    """A file with nothing risky exits 0 and prints nothing on stdout."""
    (project / "migrations" / "001.sql").write_text("ALTER TABLE t ADD COLUMN c text;\n")
    assert lint() == 0
    assert capsys.readouterr().out == ""


def test_findings_exit_1_with_location_and_help(project, capsys):
    """A risky statement exits 1 and is printed as file:line:col rule-id message + help."""
    path = project / "migrations" / "002.sql"
    path.write_text("SELECT 1;\n" + RISKY)
    assert lint(str(path)) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{path}:2:1 require-concurrent-index-creation ")
    assert "  help: " in captured.out
    assert "1 finding (1 error, 0 warnings) in 1 file" in captured.err


def test_syntax_error_exits_2_with_position_and_no_traceback(project, capsys):
    """A file that does not parse exits 2 with file:line:col and the parser's message."""
    path = project / "migrations" / "003.sql"
    path.write_text("SELECT 1;\nALTER TABLE t ADD COLUMN;\n")
    assert lint(str(path)) == 2
    err = capsys.readouterr().err
    assert f'{path}:2:25: syntax error at or near ";"' in err
    assert "Traceback" not in err


def test_no_files_and_no_paths_is_a_usage_error(tmp_path, monkeypatch, capsys):
    """With nothing to lint the command says so in one line and exits 2."""
    monkeypatch.chdir(tmp_path)
    assert lint() == 2
    assert capsys.readouterr().err.strip().startswith("pgsteady: error: no files to lint")


def test_missing_file_is_a_usage_error(project, capsys):
    """A path that does not exist exits 2 naming it."""
    assert lint("nope.sql") == 2
    assert "nope.sql: no such file" in capsys.readouterr().err


def test_exclude_turns_rules_off(project, capsys):
    """--exclude takes comma-separated rule ids."""
    path = project / "migrations" / "x.sql"
    path.write_text(RISKY + "ALTER TABLE t ADD COLUMN j json;\n")
    assert lint(str(path), "--exclude", "require-concurrent-index-creation,prefer-jsonb") == 0


def test_unknown_rule_exits_2(project, capsys):
    """--exclude with a rule that does not exist is refused."""
    (project / "migrations" / "x.sql").write_text(RISKY)
    assert lint("--exclude", "no-such-rule") == 2
    assert "--exclude: no rule named 'no-such-rule'" in capsys.readouterr().err


def test_warn_option_keeps_exit_0(project, capsys):
    """--warn reports a rule as a warning without failing."""
    path = project / "migrations" / "x.sql"
    path.write_text(RISKY)
    assert lint(str(path), "--warn", "require-concurrent-index-creation") == 0
    assert "warning:" in capsys.readouterr().out


def test_runner_timeouts_switch(project, capsys):
    """--no-assume-runner-timeouts reports a file with no lock_timeout."""
    path = project / "migrations" / "x.sql"
    path.write_text("ALTER TABLE t ADD COLUMN c text;\n")
    assert lint(str(path)) == 0
    assert lint(str(path), "--no-assume-runner-timeouts") == 1
    assert "require-lock-timeout" in capsys.readouterr().out


def test_json_format(project, capsys):
    """--format json prints one JSON document with schema_version."""
    (project / "migrations" / "x.sql").write_text(RISKY)
    assert lint("--format", "json") == 1
    document = json.loads(capsys.readouterr().out)
    assert document["schema_version"] == 1
    assert document["findings"][0]["rule"] == "require-concurrent-index-creation"


def test_github_format(project, capsys):
    """--format github prints workflow annotations."""
    (project / "migrations" / "x.sql").write_text(RISKY)
    assert lint("--format", "github") == 1
    assert capsys.readouterr().out.startswith("::error file=migrations/x.sql,line=1,col=1,")


def test_explain_prints_the_rule(capsys):
    """--explain RULE prints its documentation and exits 0."""
    assert lint("--explain", "prefer-jsonb") == 0
    assert capsys.readouterr().out.startswith("prefer-jsonb: ")


def test_explain_unknown_rule_exits_2(capsys):
    """--explain with a misspelled id exits 2 with a suggestion."""
    assert lint("--explain", "prefer-json") == 2
    assert "did you mean prefer-jsonb" in capsys.readouterr().err


def test_list_rules(capsys):
    """--list-rules prints every rule id with its message."""
    assert lint("--list-rules") == 0
    assert "ban-vacuum-full\tVACUUM FULL" in capsys.readouterr().out


def test_bad_option_values_exit_2(project, capsys):
    """A bad --pg-version or --large-table is an argparse usage error (exit 2)."""
    for argv in (["--pg-version", "x"], ["--large-table", "many"]):
        with pytest.raises(SystemExit) as info:
            lint(*argv)
        assert info.value.code == 2


def test_colour_on_a_terminal_unless_no_color(project, monkeypatch, capsys):
    """Colour is used on a terminal and dropped when NO_COLOR is set."""
    from pgsteady.cli import lint as lint_cli

    class Tty:
        def isatty(self) -> bool:
            return True

    assert lint_cli._use_color(Tty())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not lint_cli._use_color(Tty())
    assert not lint_cli._use_color(sys.stdout)


def test_real_process_exit_code_and_output(project):
    """The installed entry point lints a file in a separate process, colourless on a pipe."""
    (project / "migrations" / "x.sql").write_text("VACUUM FULL t;\n")
    done = subprocess.run([sys.executable, "-m", "pgsteady", "lint"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 1
    assert done.stdout.startswith("migrations/x.sql:1:1 ban-vacuum-full ")
    assert "\x1b[" not in done.stdout


def test_config_paths_are_relative_to_the_pyproject(project, monkeypatch, capsys):
    """Run from a subfolder, `paths` still means the folder next to pyproject.toml."""
    (project / "migrations" / "x.sql").write_text("VACUUM FULL t;\n")
    sub = project / "src"
    sub.mkdir()
    monkeypatch.chdir(sub)
    assert lint() == 1
    assert capsys.readouterr().out.startswith("../migrations/x.sql:1:1 ban-vacuum-full ")


def test_deeply_nested_expression_is_linted_not_a_syntax_error(tmp_path):
    """600 chained || parse: the file is linted (its other finding reported), no traceback."""
    import subprocess
    import sys

    path = tmp_path / "deep.sql"
    path.write_text("UPDATE t SET v = " + " || ".join(["'a'"] * 600) + " WHERE id = 1;\n"
                    "VACUUM FULL t;\n")
    out = subprocess.run([sys.executable, "-m", "pgsteady", "lint", str(path)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1, out.stderr
    assert "ban-vacuum-full" in out.stdout
    assert "Traceback" not in out.stderr + out.stdout
