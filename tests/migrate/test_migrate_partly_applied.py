"""A goose NO TRANSACTION file that failed part-way: its first statements stay applied, its
version is not recorded (goose's history has no place for steps), and both the failure and
``--status`` say so instead of a bare "pending"."""

from __future__ import annotations

import pytest
from migrate_helpers import FAST, run_cli, write_migrations

from pgsteady.errors import MigrationError
from pgsteady.migrate import apply, source

FILES = {
    "001_t.sql": "-- +goose Up\nCREATE TABLE t (a int);\n",
    "002_steps.sql": "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE TABLE steps (n int);\n"
                     "CREATE INDEX CONCURRENTLY t_nope ON t (nope);\n",
}


def test_failure_says_the_file_stays_pending_with_its_first_steps_applied(tmp_path, db):
    """The error names the steps that ran and that --status will show the file pending."""
    folder = write_migrations(tmp_path / "m", FILES)
    with pytest.raises(MigrationError) as err:
        apply.migrate(db, source.load_dir(folder), FAST)
    message = str(err.value)
    assert "(statement 1 of 2 in this file ran before it and stay applied" in message
    assert "--status shows it pending, and a rerun runs the whole file again" in message


def test_status_says_a_pending_stepwise_file_may_be_partly_applied(tmp_path, db):
    """--status shows such a file pending with a word on the steps a failed run leaves, as
    the history cannot tell how many ran; a transactional pending file gets no such word."""
    folder = write_migrations(tmp_path / "m", FILES)
    with pytest.raises(MigrationError):
        apply.migrate(db, source.load_dir(folder), FAST)
    write_migrations(folder, {"003_u.sql": "-- +goose Up\nCREATE TABLE u (a int);\n"})
    with apply.connect(db) as conn:
        entries = {e.tag: e for e in apply.states(conn, source.load_dir(folder), FAST)}
    assert entries["2"].state == "pending"
    assert entries["2"].detail == (
        "its 2 statements run one by one outside a transaction: if a run failed part-way, the "
        "statements before the failed one are applied though the history cannot show it, and "
        "goose reruns the whole file")
    assert entries["3"].state == "pending" and entries["3"].detail == ""
    shown = run_cli("migrate", "--dsn", db, "--dir", str(folder), "--status")
    assert "2  pending       002_steps.sql  (its 2 statements run one by one" in shown.stdout
