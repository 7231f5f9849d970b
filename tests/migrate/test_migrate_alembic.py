"""An Alembic project (alembic_example/) gets per-revision transactions, lock timeouts and
retries through run_alembic_migrations() in its env.py."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from migrate_helpers import FAST, columns
from psycopg.conninfo import conninfo_to_dict

from pgsteady.errors import MigrationBlocked, MigrationError

EXAMPLE = Path(__file__).parent / "alembic_example"


def alembic_config(dsn: str, policy=FAST, **attributes) -> Config:
    info = conninfo_to_dict(dsn)
    cfg = Config(str(EXAMPLE / "alembic.ini"))
    cfg.set_main_option("script_location", str(EXAMPLE))
    cfg.set_main_option("sqlalchemy.url", f"postgresql+psycopg://{info['user']}@{info['host']}:"
                                          f"{info['port']}/{info['dbname']}")
    cfg.attributes["pgsteady_policy"] = policy
    cfg.attributes.update(attributes)
    return cfg


def version(dsn: str) -> str | None:
    with psycopg.connect(dsn) as conn:
        if conn.execute("SELECT to_regclass('alembic_version')").fetchone()[0] is None:
            return None
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return row[0] if row else None


def test_upgrade_applies_each_revision(db):
    """upgrade head applies every revision and stamps the head."""
    command.upgrade(alembic_config(db), "head")
    assert version(db) == "0003"
    assert columns(db, "orgs") == ["id", "name", "flag", "plan"]


def test_each_revision_is_its_own_transaction(db):
    """A revision failing half-way leaves the earlier revisions committed and none of itself."""
    with pytest.raises(CommandError, match=r"alembic upgrade 0002 -> 0003 failed: 22012 division by "
                                           r"zero; nothing of it was applied") as err:
        command.upgrade(alembic_config(db, break_0003=True), "head")
    assert isinstance(err.value.__cause__, MigrationError)
    assert version(db) == "0002"
    assert columns(db, "orgs") == ["id", "name", "flag"]  # 0003's add_column rolled back
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT to_regclass('plans')").fetchone()[0] is None
    command.upgrade(alembic_config(db), "head")
    assert version(db) == "0003"


def test_blocked_revision_gives_up_fast(db, pgsteady_lock_holder, caplog):
    """A blocked revision retries with rising lock_timeout, names the blocker, gives up in budget."""
    command.upgrade(alembic_config(db), "0001")
    holder = pgsteady_lock_holder(db, "orgs", select=True, application_name="dashboard-logs")
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="pgsteady.migrate"), \
            pytest.raises(CommandError) as err:
        command.upgrade(alembic_config(db), "head")
    assert isinstance(err.value.__cause__, MigrationBlocked)
    assert time.monotonic() - start <= FAST.retry_budget + 0.5
    assert f"pid {holder.pid} 'dashboard-logs'" in str(err.value)
    assert version(db) == "0001"
    assert columns(db, "orgs") == ["id", "name"]
    tries = [r.getMessage() for r in caplog.records if "could not get its locks" in r.getMessage()]
    assert len(tries) >= 3
    assert "lock_timeout 100 ms" in tries[0] and "lock_timeout 200 ms" in tries[1]
    assert "holds AccessShareLock on public.orgs" in tries[0]


def test_blocked_revision_applies_once_the_lock_is_free(db, pgsteady_lock_holder, caplog):
    """A blocker that ends within the budget: the revision retries and applies."""
    command.upgrade(alembic_config(db), "0001")
    holder = pgsteady_lock_holder(db, "orgs", application_name="dashboard-logs")
    threading.Timer(0.5, holder.release).start()
    with caplog.at_level(logging.INFO, logger="pgsteady.migrate"):
        command.upgrade(alembic_config(db, dataclasses.replace(FAST, retry_budget=3.0)), "head")
    assert version(db) == "0003"
    applied = [r.getMessage() for r in caplog.records if r.getMessage().startswith("applied")]
    assert len(applied) == 2
    assert not applied[0].endswith("(1 tries)")


def test_alembic_cli_prints_one_line(db, pgsteady_lock_holder, tmp_path):
    """Through the alembic command line, a blocked upgrade is one FAILED line, no traceback."""
    info = conninfo_to_dict(db)
    ini = tmp_path / "alembic.ini"
    ini.write_text((EXAMPLE / "alembic.ini").read_text()
                   .replace("%(here)s", str(EXAMPLE))
                   .replace("postgresql+psycopg://postgres@127.0.0.1/app",
                            f"postgresql+psycopg://{info['user']}@{info['host']}:{info['port']}/"
                            f"{info['dbname']}"))
    command.upgrade(alembic_config(db), "0001")
    pgsteady_lock_holder(db, "orgs", application_name="dashboard-logs")
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(ini), "upgrade", "head"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PGSTEADY_EXAMPLE_BUDGET": "1"})
    assert result.returncode != 0  # alembic's own code for a CommandError (255)
    assert "Traceback" not in result.stderr + result.stdout
    assert "try 1 could not get its locks" in result.stderr  # each try is logged
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED:")]
    assert len(failed) == 1 and "'dashboard-logs'" in failed[0]
    assert version(db) == "0001"
