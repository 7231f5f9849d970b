"""The lab's servers let in their owner only: SCRAM, a private passfile, secret-free DSNs."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import stat
import subprocess

import psycopg
import pytest

from pgsteady.lab import _auth
from pgsteady.lab.wire import WireConnection, WireError
from pgsteady.settings import redact


def _psql(dsn: str, *, as_user: str | None = None) -> subprocess.CompletedProcess[str]:
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    command = "SHOW VERSION" if "dbname=pgbouncer" in dsn else "select current_user"
    argv = [psql, "-X", "-w", "-At", "-c", command, dsn]
    if as_user is not None:
        argv = ["runuser", "-u", as_user, "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30,
                          check=False, cwd="/")


@pytest.fixture
def stack(pgsteady_stack):
    return pgsteady_stack(pool_size=1)


def test_owner_connects_with_the_printed_dsns_alone(stack):
    """The DSNs carry no password, yet psql (no PG* variables) and psycopg log in with them."""
    for dsn in (stack.direct_dsn(), stack.pooled_dsn()):
        assert stack.pgbouncer.password not in dsn
        assert redact(dsn) == dsn
        out = _psql(dsn)
        assert out.returncode == 0 and out.stdout.strip() == "postgres", out.stderr
    with psycopg.connect(stack.pooled_dsn(), prepare_threshold=None) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
    assert stack.pgbouncer.admin("SHOW VERSION")


def test_passfile_and_auth_file_are_private(stack):
    """The passfile and PgBouncer's auth file are 0600 inside a 0700 directory."""
    for path in (stack.postgres.passfile, stack.pgbouncer.passfile,
                 stack.pgbouncer.workdir / "userlist.txt"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, path.parent


def test_postgres_stores_the_secret_pgbouncer_has(stack):
    """PostgreSQL keeps the very SCRAM secret PgBouncer checks clients against."""
    with psycopg.connect(stack.direct_dsn()) as conn:
        row = conn.execute("select rolpassword from pg_authid where rolname = 'postgres'") \
            .fetchone()
    assert row is not None and row[0] == _auth.scram_secret(stack.postgres.password)
    assert row[0] in (stack.pgbouncer.workdir / "userlist.txt").read_text()


def test_wrong_or_missing_password_is_refused(stack):
    """Without the passfile, or with a wrong password, neither server lets anyone in."""
    for port in (stack.postgres.port, stack.pgbouncer.port):
        assert _psql(f"host=127.0.0.1 port={port} user=postgres dbname=postgres").returncode
        assert _psql(f"host=127.0.0.1 port={port} user=postgres dbname=postgres "
                     f"password=guess").returncode

    async def wire(password: str) -> None:
        conn = await WireConnection.connect("127.0.0.1", stack.pgbouncer.port, user="postgres",
                                            dbname="postgres", password=password)
        conn.close()

    asyncio.run(wire(stack.pgbouncer.password))
    with pytest.raises(WireError):
        asyncio.run(wire("guess"))


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None,
                    reason="needs root to act as another OS user")
def test_another_os_user_cannot_connect(stack):
    """As `nobody`, every lab address refuses: TCP without the secret, the passfile and the
    Unix socket are out of reach; the owner gets in with the same DSNs."""
    pwd.getpwnam("nobody")
    dsns = [stack.direct_dsn(), stack.pooled_dsn(), stack.admin_dsn,
            stack.postgres.dsn(host=str(stack.postgres.workdir))]
    for dsn in dsns:
        out = _psql(dsn, as_user="nobody")
        assert out.returncode != 0, (dsn, out.stdout)
        assert _psql(dsn).returncode == 0, dsn
    leak = subprocess.run(["runuser", "-u", "nobody", "--", "cat", str(stack.postgres.passfile)],
                          capture_output=True, text=True, timeout=10, check=False)
    assert leak.returncode != 0 and stack.postgres.password not in leak.stdout
