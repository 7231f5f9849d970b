"""Helpers for the migrate tests: migration folders, the CLI as a process, catalog reads."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg

from pgsteady.migrate.apply import Policy

PGSTEADY = [sys.executable, "-m", "pgsteady"]

# Small numbers so the whole folder runs in well under two minutes.
FAST = Policy(lock_timeout=0.3, first_lock_timeout=0.1, statement_timeout=10, retries=20,
              retry_budget=1.5, first_wait=0.05, max_wait=0.2, runner_wait=1.0,
              blocker_age=0.1)


def write_migrations(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        (folder / name).write_text(textwrap.dedent(body).lstrip())
    return folder


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PGSTEADY, *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def columns(dsn: str, table: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attnum > 0 AND NOT attisdropped ORDER BY attnum", [table]).fetchall()
    return [r[0] for r in rows]


def history(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        if conn.execute("SELECT to_regclass('public.pgsteady_migrations')").fetchone()[0] is None:
            return []
        return [r[0] for r in conn.execute(
            "SELECT version FROM public.pgsteady_migrations ORDER BY version").fetchall()]
