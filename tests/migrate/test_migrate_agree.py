"""migrate refuses when the folder and the history disagree; --status shows it; --accept fixes."""

from __future__ import annotations

import json

from migrate_helpers import history, run_cli, write_migrations

ADD = {"0002_add_flag.sql": "ALTER TABLE orgs ADD COLUMN flag boolean;\n"}


def _migrate(folder, db, *extra):
    return run_cli("migrate", "--dsn", db, "--dir", str(folder), *extra)


def test_edited_file_is_refused_then_accepted(db, orgs_dir):
    """An applied file edited afterwards: exit 1 naming it; --accept records it as it is now."""
    (orgs_dir / "0001_create_orgs.sql").write_text("CREATE TABLE orgs (id int);\n")
    write_migrations(orgs_dir, ADD)
    refused = _migrate(orgs_dir, db)
    assert refused.returncode == 1, refused.stderr
    assert "0001_create_orgs.sql: changed (edited after it was applied)" in refused.stderr
    assert "--accept VERSION" in refused.stderr
    assert history(db) == [1]  # 0002 did not run either
    accepted = _migrate(orgs_dir, db, "--accept", "1")
    assert accepted.returncode == 0, accepted.stderr
    assert "accepted" in accepted.stdout and history(db) == [1]
    assert _migrate(orgs_dir, db).returncode == 0
    assert history(db) == [1, 2]


def test_renamed_and_foreign_file_under_applied_version(db, orgs_dir):
    """Another file under an applied version number is named with both names."""
    (orgs_dir / "0001_create_orgs.sql").rename(orgs_dir / "0001_other_project.sql")
    refused = _migrate(orgs_dir, db)
    assert refused.returncode == 1
    assert "applied as 'create_orgs', the file now says 'other_project'" in refused.stderr


def test_missing_and_empty_folder(db, orgs_dir, tmp_path):
    """Applied versions without a file, and an empty folder, are refused; --accept forgets."""
    (orgs_dir / "0001_create_orgs.sql").unlink()
    write_migrations(orgs_dir, ADD)
    refused = _migrate(orgs_dir, db)
    assert refused.returncode == 1 and "version 1: missing" in refused.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _migrate(empty, db)
    assert result.returncode == 1 and "holds no migrations" in result.stderr
    assert _migrate(orgs_dir, db, "--accept", "1").returncode == 0
    assert _migrate(orgs_dir, db).returncode == 0 and history(db) == [2]


def test_out_of_order_needs_the_flag(db, orgs_dir):
    """A pending version older than the newest applied one runs only with the flag."""
    write_migrations(orgs_dir, {"0005_late.sql": "ALTER TABLE orgs ADD COLUMN late int;\n"})
    assert _migrate(orgs_dir, db).returncode == 0
    write_migrations(orgs_dir, ADD)
    refused = _migrate(orgs_dir, db)
    assert refused.returncode == 1 and "0002_add_flag.sql: out-of-order" in refused.stderr
    allowed = _migrate(orgs_dir, db, "--allow-out-of-order")
    assert allowed.returncode == 0, allowed.stderr
    assert history(db) == [1, 2, 5]


def test_status_lists_every_state(db, orgs_dir):
    """--status: applied, pending, changed, missing; --json with schema_version; exit 1."""
    write_migrations(orgs_dir, {"0003_x.sql": "SELECT 1;\n"})
    assert _migrate(orgs_dir, db).returncode == 0
    (orgs_dir / "0003_x.sql").unlink()
    write_migrations(orgs_dir, ADD | {"0004_y.sql": "SELECT 2;\n"})
    (orgs_dir / "0001_create_orgs.sql").write_text("SELECT 'edited';\n")
    text = _migrate(orgs_dir, db, "--status", "--allow-out-of-order")
    assert text.returncode == 1
    assert "public.pgsteady_migrations" in text.stdout
    data = json.loads(_migrate(orgs_dir, db, "--status", "--json",
                               "--allow-out-of-order").stdout)
    assert data["schema_version"] == 1 and data["ok"] is False
    assert {v["version"]: v["state"] for v in data["versions"]} == {
        "1": "changed", "2": "pending", "3": "missing", "4": "pending"}


def test_too_large_version_exit_2(db, tmp_path):
    """A version above bigint is a usage error (exit 2), one line naming the file."""
    folder = write_migrations(tmp_path / "m", {"99999999999999999999_x.sql": "SELECT 1;\n"})
    result = _migrate(folder, db)
    assert result.returncode == 2
    assert "99999999999999999999_x.sql:1: version 99999999999999999999 is too large" \
        in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_skipped_entries_are_said(db, tmp_path):
    """Upper-case .SQL, a dangling symlink and a subfolder are named on stderr with why."""
    folder = write_migrations(tmp_path / "m", {"0001_a.sql": "SELECT 1;\n",
                                               "0002_b.SQL": "SELECT 2;\n"})
    write_migrations(folder / "sub", {"0003_c.sql": "SELECT 3;\n"})
    (folder / "0004_d.sql").symlink_to(folder / "gone.sql")
    result = _migrate(folder, db)
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stderr
    for name, why in (("0002_b.SQL", "lower-case .sql"), ("0004_d.sql", "link to nothing"),
                      ("sub", "subfolder")):
        [line] = [x for x in result.stderr.splitlines() if f"/{name}:" in x]
        assert why in line
    assert history(db) == [1]


def test_index_timeout_help_default_parses():
    """The default --index-timeout shows in help is one the option accepts."""
    import re

    from pgsteady.cli import _args

    result = run_cli("migrate", "--help")
    shown = re.search(r"^ +--index-timeout .*?\(default (\S+?)\)", result.stdout,
                      re.DOTALL | re.MULTILINE)
    assert shown is not None
    assert _args.duration(shown[1]) == 3600.0
