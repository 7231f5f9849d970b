"""Alembic revisions that commit for themselves (issue 10, case 5): a lone autocommit_block()
runs in parts with its history row last; any other commit is refused before anything runs."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from migrate_helpers import FAST
from psycopg.conninfo import conninfo_to_dict

from pgsteady.errors import MigrationBlocked, MigrationError

EXAMPLE = Path(__file__).parent / "alembic_example"

HEADER = '''
revision = "{rev}"
down_revision = {down}
branch_labels = None
depends_on = None

import sqlalchemy as sa
from alembic import op

'''


def project(tmp_path: Path, dsn: str, revisions: list[str]) -> Config:
    """An Alembic project using the example env.py, with ``revisions`` as its history."""
    root = tmp_path / "alembic_project"
    (root / "versions").mkdir(parents=True)
    for name in ("env.py", "script.py.mako"):
        shutil.copy(EXAMPLE / name, root / name)
    down = "None"
    for number, body in enumerate(revisions, start=1):
        rev = f"{number:04d}"
        (root / "versions" / f"{rev}_r.py").write_text(
            HEADER.format(rev=rev, down=down) + textwrap.dedent(body).strip() + "\n")
        down = f'"{rev}"'
    info = conninfo_to_dict(dsn)
    cfg = Config()
    cfg.set_main_option("script_location", str(root))
    cfg.set_main_option("sqlalchemy.url", f"postgresql+psycopg://{info['user']}@{info['host']}:"
                                          f"{info['port']}/{info['dbname']}")
    cfg.attributes["pgsteady_policy"] = FAST
    return cfg


def version(dsn: str) -> str | None:
    with psycopg.connect(dsn) as conn:
        if conn.execute("SELECT to_regclass('alembic_version')").fetchone()[0] is None:
            return None
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return row[0] if row else None


def exists(dsn: str, name: str) -> bool:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT to_regclass(%s) IS NOT NULL", [name]).fetchone()[0]


CREATE_T = '''
def upgrade():
    op.execute("CREATE TABLE t (id int PRIMARY KEY, name text)")
'''
LONE_BLOCK = '''
def upgrade():
    """Build the index without blocking writers."""
    with op.get_context().autocommit_block():
        op.execute("CREATE INDEX CONCURRENTLY t_name ON t (name)")
'''


def test_lone_autocommit_block_runs_with_history_row_last(db, tmp_path):
    """A revision that is one autocommit_block() runs outside a transaction, then is recorded."""
    cfg = project(tmp_path, db, [CREATE_T, LONE_BLOCK, '''
def upgrade():
    op.execute("ALTER TABLE t ADD COLUMN flag boolean")
'''])
    command.upgrade(cfg, "head")
    assert version(db) == "0003"
    with psycopg.connect(db) as conn:
        valid = conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = "
                             "'t_name'::regclass").fetchone()[0]
    assert valid


def test_lone_autocommit_block_blocked_retries_then_gives_up(db, tmp_path, pgsteady_lock_holder):
    """A blocked autocommit block is retried on the lock schedule; nothing moves if it fails."""
    cfg = project(tmp_path, db, [CREATE_T, LONE_BLOCK])
    command.upgrade(cfg, "0001")
    pgsteady_lock_holder(db, "t", "SHARE ROW EXCLUSIVE", application_name="nightly-import")
    with pytest.raises(CommandError) as err:
        command.upgrade(cfg, "head")
    assert isinstance(err.value.__cause__, MigrationBlocked)
    assert "'nightly-import'" in str(err.value)
    assert version(db) == "0001"


@pytest.mark.parametrize(("body", "why"), [
    ('''
def upgrade():
    op.execute("CREATE TABLE u (id int)")
    op.get_bind().commit()
    op.execute("CREATE TABLE v (id int)")
''', "commits by itself"),
    ('''
def upgrade():
    conn = op.get_bind()
    conn.execute(sa.text("CREATE TABLE u (id int)"))
    conn.commit()
''', "commits by itself"),
    ('''
def upgrade():
    op.execute("CREATE TABLE u (id int)")
    with op.get_context().autocommit_block():
        op.execute("CREATE INDEX CONCURRENTLY t_name ON t (name)")
''', "does work around its autocommit_block()"),
])
def test_midway_commit_is_refused_before_anything_runs(db, tmp_path, body, why):
    """A revision that would commit midway is refused, naming it; no revision runs at all."""
    cfg = project(tmp_path, db, [CREATE_T, body])
    with pytest.raises(CommandError) as err:
        command.upgrade(cfg, "head")
    message = str(err.value)
    assert "\n" not in message
    assert "alembic upgrade 0001 -> 0002" in message and why in message
    assert "0002_r.py:" in message
    assert isinstance(err.value.__cause__, MigrationError)
    assert version(db) is None
    assert not exists(db, "t") and not exists(db, "u")


def test_commit_the_check_cannot_see_is_rolled_back(db, tmp_path):
    """A commit hidden from the source check is stopped when it happens; nothing of it stays."""
    cfg = project(tmp_path, db, [CREATE_T, '''
def upgrade():
    op.execute("CREATE TABLE u (id int)")
    finish = getattr(op.get_bind(), "com" + "mit")
    finish()
    op.execute("CREATE TABLE v (id int)")
'''])
    with pytest.raises(CommandError, match="commits by itself; it was rolled back"):
        command.upgrade(cfg, "head")
    assert version(db) == "0001"
    assert not exists(db, "u") and not exists(db, "v")
    command.upgrade(cfg, "0001")  # a rerun is clean: no "already exists"


def _statements_for(tmp_path: Path, dsn: str, revisions: int) -> tuple[int, int]:
    """(SQL statements sent, times the steps were worked out) for ``upgrade head``."""
    from unittest import mock

    from alembic.script.base import ScriptDirectory
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    count = 0

    def seen(*_: object) -> None:
        nonlocal count
        count += 1

    steps = mock.patch.object(ScriptDirectory, "_upgrade_revs", autospec=True,
                              side_effect=ScriptDirectory._upgrade_revs)

    cfg = project(tmp_path / str(revisions), dsn, ['''
def upgrade():
    op.execute("SELECT 1")
'''] * revisions)
    event.listen(Engine, "before_cursor_execute", seen)
    try:
        with steps as worked_out:
            command.upgrade(cfg, "head")
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert version(dsn) == f"{revisions:04d}"
    return count, worked_out.call_count


def test_work_per_revision_does_not_grow_with_history(pgsteady_postgres, tmp_path):
    """Linear in history length: steps worked out once; statements per revision constant."""
    counts = {}
    for revisions in (10, 40):
        dsn = pgsteady_postgres.create_database(f"alembic_linear_{revisions}")
        try:
            counts[revisions] = _statements_for(tmp_path, dsn, revisions)
        finally:
            pgsteady_postgres.drop_database(f"alembic_linear_{revisions}")
    # The steps are worked out once (it was once per revision: quadratic).
    assert counts[10][1] == counts[40][1] == 1
    per_revision = (counts[40][0] - counts[10][0]) / 30
    assert per_revision <= 3  # the revision's own statement and the version row (+ slack)
    assert counts[10][0] <= 10 * per_revision + 25  # plus a fixed start-up cost


def test_downgrade_runs_through_the_helper_too(db, tmp_path):
    """downgrade walks back one transaction per revision, each with its version row."""
    cfg = project(tmp_path, db, [CREATE_T + '''
def downgrade():
    op.execute("DROP TABLE t")
''', '''
def upgrade():
    op.execute("ALTER TABLE t ADD COLUMN flag boolean")


def downgrade():
    op.execute("ALTER TABLE t DROP COLUMN flag")
'''])
    command.upgrade(cfg, "head")
    command.downgrade(cfg, "0001")
    assert version(db) == "0001" and exists(db, "t")
    command.downgrade(cfg, "base")
    assert version(db) is None and not exists(db, "t")


def test_orm_session_commit_joined_to_the_revision_is_allowed(db, tmp_path):
    """Session(bind=op.get_bind()).commit() joins the revision's transaction: it runs."""
    cfg = project(tmp_path, db, [CREATE_T, '''
def upgrade():
    from sqlalchemy.orm import Session

    session = Session(bind=op.get_bind())
    session.execute(sa.text("INSERT INTO t VALUES (1, 'one')"))
    session.commit()
    bind = op.get_bind()
    bind.execute(sa.text("INSERT INTO t VALUES (2, 'two')"))
'''])
    command.upgrade(cfg, "head")
    assert version(db) == "0002"
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 2


def test_alembic_names_the_blocker_it_saw(db, tmp_path, pgsteady_lock_holder):
    """A revision blocked inside DO (nothing to predict from) names the session it saw."""
    cfg = project(tmp_path, db, [CREATE_T, '''
def upgrade():
    op.execute("DO $$ BEGIN EXECUTE 'ALTER TABLE t ADD COLUMN flag boolean'; END $$")
'''])
    command.upgrade(cfg, "0001")
    holder = pgsteady_lock_holder(db, "t", select=True, application_name="hidden-report")
    with pytest.raises(CommandError) as err:
        command.upgrade(cfg, "head")
    assert isinstance(err.value.__cause__, MigrationBlocked)
    assert f"pid {holder.pid} 'hidden-report'" in str(err.value)
    assert "holds AccessShareLock on public.t" in str(err.value)
    assert version(db) == "0001"


def test_batched_revisions_commit_one_transaction_each(db, tmp_path):
    """Revisions run in one pass still get a transaction each (one xid per revision), and a
    failing one leaves the ones before it committed with the version row at the last of them."""
    record = '''
def upgrade():
    op.execute("INSERT INTO seen SELECT pg_current_xact_id()")
'''
    cfg = project(tmp_path, db, ['''
def upgrade():
    op.execute("CREATE TABLE seen (xid xid8)")
''', record, record, record, '''
def upgrade():
    op.execute("INSERT INTO seen SELECT pg_current_xact_id()")
    op.execute("SELECT 1 / 0")
''', record])
    with pytest.raises(CommandError, match=r"0004 -> 0005 failed: 22012"):
        command.upgrade(cfg, "head")
    assert version(db) == "0004"
    with psycopg.connect(db) as conn:
        xids = conn.execute("SELECT count(*), count(DISTINCT xid) FROM seen").fetchone()
    assert xids == (3, 3)


def test_commit_in_a_function_nested_in_upgrade_is_refused_too(db, tmp_path):
    """The quick look at upgrade()'s code (no source read) follows nested functions: a commit
    in one is still refused before anything runs."""
    cfg = project(tmp_path, db, [CREATE_T, '''
def upgrade():
    def finish():
        op.get_bind().commit()

    op.execute("CREATE TABLE u (id int)")
    finish()
'''])
    with pytest.raises(CommandError, match=r"alembic upgrade 0001 -> 0002 \(.*0002_r.py:\d+\) "
                                           r"commits by itself"):
        command.upgrade(cfg, "head")
    assert version(db) is None and not exists(db, "t") and not exists(db, "u")
