"""pytest fixtures on real servers: one PostgreSQL per session, a fresh database per test,
and a PgBouncer (+ fault proxy) per test with whatever pool settings the test asks for.

Fixtures:
    pgsteady_postgres   session: a throwaway :class:`~pgsteady.lab.cluster.Postgres`
    pgsteady_database   function: a new empty database on it (``.name``, ``.dsn``)
    pgsteady_stack      function: ``make(pool_size=1, proxy=True, ...) -> Cluster`` over the
                        session's PostgreSQL; everything it made is stopped after the test
    pgsteady_proxy      function: a :class:`~pgsteady.lab.proxy.FaultProxy` to the server
    pgsteady_redis      function: a throwaway, password-protected
                        :class:`~pgsteady.lab.redis_server.RedisServer` (``.url``, ``.client()``,
                        ``.stop()``, ``.restart()``, ``with .hung():`` for a Redis that
                        does not answer)
    pgsteady_lock_holder  function: hold a lock of a chosen mode on a table in another
                        session (see :mod:`pgsteady.migrate.testing`)

Markers ``slow`` (long runs) and ``lab`` (lab scenarios) are registered here.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest

from pgsteady.lab import _process
from pgsteady.lab.cluster import Cluster, Postgres, make_workdir, versions
from pgsteady.lab.proxy import FaultProxy
from pgsteady.lab.redis_server import RedisServer
from pgsteady.migrate.testing import pgsteady_lock_holder  # noqa: F401

# Tests want PgBouncer to retry a failed server login quickly (its default waits 15 s).
TEST_PGBOUNCER_SETTINGS = {"server_login_retry": 1}


class FreshDatabase(NamedTuple):
    """A database made for one test."""

    name: str
    dsn: str


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a long run; deselect with -m 'not slow'")
    config.addinivalue_line("markers", "lab: runs a lab scenario on the embedded cluster")


def pytest_report_header(config: pytest.Config) -> str:
    found = versions()
    return f"pgsteady lab: {found['postgresql']}; {found['pgbouncer']}"


@pytest.fixture(scope="session")
def pgsteady_postgres() -> Iterator[Postgres]:
    """One throwaway PostgreSQL for the whole session.

    Its DSNs name its passfile; ``PGPASSFILE`` is also pointed at it for the session (unless
    already set), so a DSN a test writes by hand (``host=127.0.0.1 port=...``) still logs in.
    """
    who = _process.run_as()
    workdir = make_workdir(None, who, prefix="pgsteady-test-")
    server = Postgres(workdir, who=who)
    set_passfile = "PGPASSFILE" not in os.environ
    try:
        server.start()
        if set_passfile:
            os.environ["PGPASSFILE"] = str(server.passfile)
        yield server
    finally:
        if set_passfile:
            os.environ.pop("PGPASSFILE", None)
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def pgsteady_database(pgsteady_postgres: Postgres) -> Iterator[FreshDatabase]:
    """A new, empty database for this test only."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    dsn = pgsteady_postgres.create_database(name)
    try:
        yield FreshDatabase(name, dsn)
    finally:
        pgsteady_postgres.drop_database(name)


@pytest.fixture
def pgsteady_stack(pgsteady_postgres: Postgres) -> Iterator[Callable[..., Cluster]]:
    """Make a PgBouncer (and proxy) in front of the session's PostgreSQL, for this test."""
    made: list[Cluster] = []

    def make(**kwargs: Any) -> Cluster:
        settings = {**TEST_PGBOUNCER_SETTINGS, **kwargs.pop("pgbouncer_settings", {})}
        cluster = Cluster(postgres=pgsteady_postgres, pgbouncer_settings=settings, **kwargs)
        made.append(cluster)
        return cluster.start()

    try:
        yield make
    finally:
        for cluster in made:
            cluster.stop()


@pytest.fixture
def pgsteady_proxy(pgsteady_postgres: Postgres) -> Iterator[FaultProxy]:
    """A fault proxy straight to the session's PostgreSQL."""
    with FaultProxy(pgsteady_postgres.port) as proxy:
        yield proxy


@pytest.fixture
def pgsteady_redis() -> Iterator[RedisServer]:
    """A Redis of its own for this test (loopback, password, no persistence)."""
    who = _process.run_as()
    workdir = make_workdir(None, who, prefix="pgsteady-redis-")
    server = RedisServer(workdir, who=who)
    try:
        yield server.start()
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
