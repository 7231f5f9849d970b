"""[tool.pgsteady.lint] in pyproject.toml: what it sets and what it refuses."""

from __future__ import annotations

import pytest

from pgsteady.errors import UsageError
from pgsteady.lint.config import LintConfig, load_config, parse_rows


def write(tmp_path, body: str):
    path = tmp_path / "pyproject.toml"
    path.write_text(f"[project]\nname = 'x'\n\n[tool.pgsteady.lint]\n{body}\n")
    return path


def test_every_key_is_read(tmp_path):
    """All documented keys land in the config."""
    path = write(tmp_path, """
paths = ["migrations"]
pg_version = "13.4"
disable = ["prefer-text-over-char"]
enable = []
warn = ["prefer-jsonb"]
assume_runner_timeouts = false
assume_in_transaction = true
large_table = "250k"
""")
    config = load_config(path)
    assert config.paths == ("migrations",)
    assert config.pg_version == 13
    assert config.disable == {"prefer-text-over-char"}
    assert config.warn == {"prefer-jsonb"}
    assert config.assume_runner_timeouts is False and config.assume_in_transaction is True
    assert config.large_table == 250_000


def test_nearest_pyproject_is_found_from_a_subfolder(tmp_path):
    """Without --config, the nearest pyproject.toml above the start folder is used."""
    write(tmp_path, "pg_version = 16")
    sub = tmp_path / "db" / "migrations"
    sub.mkdir(parents=True)
    assert load_config(start=sub).pg_version == 16


def test_no_section_means_defaults(tmp_path):
    """A pyproject.toml without the section gives the defaults."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert load_config(tmp_path / "pyproject.toml") == LintConfig()


@pytest.mark.parametrize(("body", "match"), [
    ("pg_versoin = 15", "unknown key.*pg_versoin"),
    ("disable = 'prefer-jsonb'", "disable must be a list"),
    ("assume_runner_timeouts = 'yes'", "true or false"),
    ("pg_version = 'fifteen'", "not a PostgreSQL major version"),
    ("large_table = 'lots'", "large_table"),
    ("pg_version = [", "not valid TOML"),
])
def test_bad_config_is_a_usage_error(tmp_path, body, match):
    """Typos and wrong types are refused with the key named, never ignored."""
    with pytest.raises(UsageError, match=match) as info:
        load_config(write(tmp_path, body))
    assert info.value.exit_code == 2


def test_found_pyproject_without_our_section_is_not_judged(tmp_path):
    """The project's own pyproject.toml is not ours to judge when it has no pgsteady section
    (it is not even parsed); one that has the section and is broken is refused."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n[broken\n")
    assert load_config(start=tmp_path) == LintConfig()
    (tmp_path / "pyproject.toml").write_text("[tool.pgsteady.lint]\npg_version = [\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_config(start=tmp_path)


def test_config_that_is_not_utf8_is_a_usage_error(tmp_path):
    """A --config file in another encoding: one line naming it, not a traceback."""
    path = tmp_path / "lint.toml"
    path.write_bytes("[tool.pgsteady.lint]\n# caf\u00e9\n".encode("latin-1"))
    with pytest.raises(UsageError, match=r"lint.toml: not valid TOML: not UTF-8"):
        load_config(path)


def test_missing_config_file_is_a_usage_error(tmp_path):
    """--config naming a file that does not exist is a usage error."""
    with pytest.raises(UsageError, match="cannot read config"):
        load_config(tmp_path / "nope.toml")


def test_row_counts_accept_suffixes():
    """Row thresholds read 500000, 250k, 1.5M."""
    assert [parse_rows(t) for t in ("500000", "250k", "1.5M", "2G")] == [
        500_000, 250_000, 1_500_000, 2_000_000_000]
    with pytest.raises(ValueError, match="row count"):
        parse_rows("1MB")
