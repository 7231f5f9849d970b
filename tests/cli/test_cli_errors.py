"""Every verb: usage errors point to its own --help, --json gets errors as JSON too, too-long
durations are usage errors, options say what they do, and the help cites the repo's docs."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgsteady._docs import OUTAGES
from pgsteady.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
PGSTEADY = [sys.executable, "-m", "pgsteady"]


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) \
        -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, sub in subs[0].choices.items():
        yield from _leaves(sub, (*path, name))


LEAVES = list(_leaves(build_parser()))


def _json_verbs() -> list[tuple[str, ...]]:
    wanted = []
    for path, parser in LEAVES:
        for action in parser._actions:
            if "--json" in action.option_strings or (
                    "--format" in action.option_strings and "json" in (action.choices or ())):
                wanted.append(path)
    return wanted


@pytest.mark.parametrize("path", [p for p, _ in LEAVES], ids=" ".join)
def test_unrecognized_arguments_point_to_the_verbs_own_help(path, capsys):
    """`pgsteady VERB --no-such-option` exits 2 in one line naming `pgsteady VERB --help`."""
    with pytest.raises(SystemExit) as info:
        main([*path, "--no-such-option"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"(see pgsteady {' '.join(path)} --help)" in err


@pytest.mark.parametrize("path", _json_verbs(), ids=" ".join)
def test_json_verbs_print_usage_errors_as_json_on_stdout(path, capsys):
    """With --json (or --format json), a usage error also prints
    {"schema_version": 1, "error": {...}} on stdout."""
    json_action = next((a for a in dict(LEAVES)[path]._actions if "--json" in a.option_strings),
                       None)
    if json_action is None:
        flag = ["--format", "json"]
    elif json_action.nargs == 0:
        flag = ["--json"]
    else:   # --json FILE: the verb writes its data to a file, and errors still go to stdout
        flag = ["--json", "out.json"]
    with pytest.raises(SystemExit) as info:
        main([*path, *flag, "--no-such-option"])
    assert info.value.code == 2
    document = json.loads(capsys.readouterr().out)
    assert document["schema_version"] == 1
    assert document["error"]["exit_code"] == 2
    assert "--no-such-option" in document["error"]["message"]


def test_runtime_errors_are_json_too():
    """A failure after parsing (cannot connect: exit 3) also reaches stdout as JSON."""
    out = subprocess.run([*PGSTEADY, "preflight", "--json", "--dsn",
                          "host=127.0.0.1 port=1 connect_timeout=2", "--dir", str(ROOT)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 3, out.stderr
    document = json.loads(out.stdout.strip().splitlines()[-1])
    assert document["schema_version"] == 1 and document["error"]["exit_code"] == 3
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("argv", [
    ["lab", "pool-drain", "--deadline", "99999999h"],
    ["lab", "up", "--query-wait-timeout", "3000000s"],
    ["migrate", "--lock-timeout", "100000000000s"],
])
def test_too_long_durations_are_usage_errors(argv, capsys):
    """A duration beyond what PostgreSQL or a wait can take exits 2 saying the maximum."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "too long; durations must be at most 596h" in capsys.readouterr().err


def test_every_lab_option_says_what_it_does():
    """Each option of every lab scenario has help text."""
    for path, parser in LEAVES:
        if path[0] != "lab":
            continue
        for action in parser._actions:
            if action.option_strings and action.help != argparse.SUPPRESS:
                assert action.help, (path, action.option_strings)


def test_lab_up_once_in_statement_mode_reports_success():
    """`lab up --pool-mode statement --once` runs its query and exits 0 (it used to open a
    transaction PgBouncer refuses, then said "cannot connect")."""
    out = subprocess.run([*PGSTEADY, "lab", "up", "--pool-mode", "statement", "--once"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "query through PgBouncer ok" in out.stdout


def test_docs_cite_the_outages_page_not_the_seeds():
    """README and help describe the outages on the docs site's outages page (never `seeds/`
    files, nor a path in the repository the wheel does not ship)."""
    readme = (ROOT / "README.md").read_text()
    assert (ROOT / "docs" / "outages.md").is_file()
    assert OUTAGES in readme
    helps = [build_parser().format_help(), *(p.format_help() for _, p in LEAVES)]
    assert any(OUTAGES in " ".join(text.split()) for text in helps)
    for text in (readme, *helps):
        assert "seeds/" not in text and "seed 000" not in text and "seed 002" not in text
    for text in helps:
        assert "docs/" not in text


@pytest.mark.parametrize("verb", [["doctor"], ["preflight", "--dir", "DIR"], ["blockers"],
                                  ["watch", "--count", "1"],
                                  ["exporter", "--listen", "127.0.0.1:0"]])
@pytest.mark.parametrize("setting", ["sslmode=bogus", "port=abc"])
def test_a_setting_libpq_refuses_is_a_usage_error_not_an_unreachable_server(verb, setting,
                                                                           tmp_path):
    """A DSN typo libpq rejects before any network (a bad sslmode, a port that is not a
    number) exits 2 naming the setting, where a refused connection exits 3."""
    (tmp_path / "0001_a.sql").write_text("SELECT 1;\n")
    verb = [str(tmp_path) if arg == "DIR" else arg for arg in verb]
    out = subprocess.run([*PGSTEADY, *verb, "--dsn", f"host=127.0.0.1 {setting}"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2, out.stderr
    assert setting.split("=")[1] in out.stderr and "invalid" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_a_reader_that_stops_early_ends_the_run_quietly():
    """`pgsteady lint --list-rules | head -0`: the reader is gone before the first line; the
    run ends with 141 (as a shell reports SIGPIPE) and no traceback."""
    proc = subprocess.Popen([*PGSTEADY, "lint", "--list-rules"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # long before the interpreter has started and written anything
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and err == ""


@pytest.mark.parametrize("columns", [50, 120])
def test_help_is_sized_as_argparse_sizes_it(columns, monkeypatch, capsys):
    """Help is wrapped to $COLUMNS exactly as argparse's own sizing (shutil's terminal size)
    would wrap it; pgsteady sizes it without importing shutil."""
    import shutil

    import pgsteady.cli

    monkeypatch.setenv("COLUMNS", str(columns))
    helps = []
    for _ in range(2):
        with pytest.raises(SystemExit):
            main(["migrate", "--help"])
        helps.append(capsys.readouterr().out)
        monkeypatch.setattr(pgsteady.cli, "_columns", lambda: shutil.get_terminal_size().columns)
    assert helps[0] == helps[1]
    assert max(len(line) for line in helps[0].splitlines() if not line.startswith(" ")) \
        <= columns - 2


@pytest.mark.parametrize("verb", [["watch", "--count", "1"],
                                  ["exporter", "--listen", "127.0.0.1:0"]])
@pytest.mark.parametrize("option", ["--dsn", "--pgbouncer"])
def test_a_dsn_libpq_cannot_parse_is_refused_before_watching(verb, option):
    """``exporter`` and ``watch`` given a connection string libpq cannot parse (an unclosed
    quote) exit 2 at once with one line naming the option, never the password; they used to
    serve (or watch) a source that could never answer."""
    out = subprocess.run([*PGSTEADY, *verb, option, "host=127.0.0.1 password='s3cr3t"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2, out.stderr
    assert option in out.stderr and "s3cr3t" not in out.stderr + out.stdout
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [["-vv", "lint", "--list-rules"], ["lint", "-vv", "--list-rules"],
                                  ["lint", "-v", "-v", "--list-rules"],
                                  ["-v", "lint", "-v", "--list-rules"]])
def test_verbose_counts_before_and_after_the_verb(argv):
    """``-v`` works after the verb as well as before it (it was refused there as an
    unrecognized argument), and the counts add up: each spelling here asks for debug."""
    probe = ("import logging, sys\nfrom pgsteady.cli import main\nimport io, contextlib\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             f"    code = main({argv!r})\n"
             "print(code, logging.getLevelName(logging.getLogger().level))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.stdout.split() == ["0", "DEBUG"], out.stderr


def test_a_reader_that_stops_early_ends_a_rich_table_quietly_too():
    """``pgsteady sim pool-drain | head -1``: rich's own console exited 1 (a failure) when the
    reader left; the run ends with 141 as any filter does, and says nothing."""
    proc = subprocess.Popen([*PGSTEADY, "sim", "pool-drain"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()  # the first line, as head -1 takes it
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err


def test_a_duration_that_must_be_positive_names_its_option():
    """``lab lock-queue --lock-timeout 0`` names the option it refuses (it said only
    'durations must be positive'); exit 2, one line, before any server starts."""
    out = subprocess.run([*PGSTEADY, "lab", "lock-queue", "--lock-timeout", "0"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2, out.stderr
    assert "--lock-timeout must be positive" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_pg_version_helps_name_every_major_that_works():
    """The lab's --pg-version help names 10-12 beside 13-18 (it said 13-18 while 10 works)
    and lint's says its default and that the version changes advice, never hides a finding."""
    from pgsteady import _majors

    lab = " ".join(next(p.format_help() for path, p in LEAVES if path == ("lab", "up")).split())
    assert f"{min(_majors.PAST_END_OF_LIFE)}-{max(_majors.PAST_END_OF_LIFE)}" in lab
    assert f"{min(_majors.SUPPORTED)}-{max(_majors.SUPPORTED)}" in lab
    lint = " ".join(next(p.format_help() for path, p in LEAVES if path == ("lint",)).split())
    assert f"default {_majors.LINT_DEFAULT}" in lint and "never hides one" in lint
