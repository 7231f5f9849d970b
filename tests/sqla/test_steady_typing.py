"""User code written against pgsteady.sqlalchemy passes ``mypy --strict``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

USER_CODE = '''
from collections.abc import Sequence

from sqlalchemy import Engine, ForeignKey, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from pgsteady.errors import CircuitOpen, DeadlineExceeded, Overloaded
from pgsteady.sqlalchemy import AsyncSteady, Steady


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]
    team_id: Mapped[int] = mapped_column(ForeignKey("users.id"))


async def lookups(engine: AsyncEngine) -> str:
    steady = AsyncSteady(engine, pooler="transaction", service="api", max_waiting=16)
    name: str | None = await steady.scalar(select(User.name).where(User.id == 7), deadline=0.05)
    ids: Sequence[int] = await steady.scalars(select(User.id), deadline=0.05)
    rows = await steady.execute(select(User.id, User.name), deadline=0.05)
    pairs: list[tuple[int, str]] = [(row[0], row[1]) for row in rows]

    async def rename(session: AsyncSession) -> int:
        await session.execute(update(User).where(User.id == 7).values(name="x"))
        return 1

    try:
        changed: int = await steady.run(rename, deadline=0.2)
    except DeadlineExceeded as exc:
        phase: str = exc.phase
        return phase
    except (Overloaded, CircuitOpen):
        return "busy"
    await steady.aclose()
    return f"{name} {len(ids)} {pairs} {changed} {steady.stats().answered}"


def sync_lookups(engine: Engine) -> int:
    with Steady(engine, statement_timeout=5) as steady:
        def count(session: Session) -> int:
            return len(session.scalars(select(User)).all())
        total: int = steady.run(count, deadline=1)
        first: User | None = steady.scalar(select(User).limit(1), deadline=1)
        return total + (first.id if first else 0)
'''


def test_user_code_passes_mypy_strict(tmp_path):
    """Typed statements give typed results: scalar -> T | None, scalars -> Sequence[T],
    run(fn) -> fn's return type, with no Any leaking into strict user code."""
    user = tmp_path / "service.py"
    user.write_text(textwrap.dedent(USER_CODE))
    env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir",
         str(tmp_path / "cache"), "--config-file", os.devnull, str(user)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
