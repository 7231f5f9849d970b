"""Fixtures for the Django tests: a fresh database of the session's PostgreSQL, and the
example project's manage.py run against it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest
from shop_project import run_manage


@pytest.fixture
def db(pgsteady_database) -> str:
    """A fresh database's DSN."""
    return pgsteady_database.dsn


@pytest.fixture
def manage(db) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``manage("migrate", ...)`` on the fresh database."""
    return lambda *args, **env: run_manage(db, *args, **env)
