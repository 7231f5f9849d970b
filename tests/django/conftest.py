"""Fixtures for the Django tests: the example project's manage.py, run against a fresh
database of the session's PostgreSQL (or through PgBouncer)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parents[2] / "examples" / "django"
SRC = Path(__file__).parents[2] / "src"


def _environ(dsn: str, env: dict[str, str]) -> dict[str, str]:
    environ = {**os.environ, "DATABASE_DSN": dsn, "PGSTEADY_RETRY_BUDGET": "1.5",
               "PGSTEADY_LOCK_TIMEOUT": "0.3", **env}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), environ.get("PYTHONPATH")]))
    return environ


def run_manage(dsn: str, *args: str, timeout: float = 120, **env: str) \
        -> subprocess.CompletedProcess[str]:
    """``python manage.py ARGS`` of the example, its database at ``dsn``."""
    return subprocess.run([sys.executable, "manage.py", *args], cwd=EXAMPLE,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env=_environ(dsn, env))


def start_manage(dsn: str, *args: str, **env: str) -> subprocess.Popen[str]:
    """``python manage.py ARGS`` started, not waited for."""
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=EXAMPLE, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_environ(dsn, env))


@pytest.fixture
def db(pgsteady_database) -> str:
    """A fresh database's DSN."""
    return pgsteady_database.dsn


@pytest.fixture
def manage(db) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``manage("migrate", ...)`` on the fresh database."""
    return lambda *args, **env: run_manage(db, *args, **env)
