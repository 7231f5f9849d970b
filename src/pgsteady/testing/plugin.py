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
    pgsteady_postgres_version  session: ``server(16) -> Postgres``, one server per major for
                        the whole session (the session's own when the major matches)
    pg_version          the major a ``pg_versions`` test runs on (its parameter)
    pgsteady_version_database  function: a new empty database on that major's server

``PGSTEADY_PG_VERSION=17`` runs the session's PostgreSQL (and so every test on it) on that
major. Markers ``slow`` (long runs), ``lab`` (lab scenarios) and ``pg_versions`` are registered
here. ``@pytest.mark.pg_versions`` runs a test once per installed major of
:data:`SUPPORTED_PG_VERSIONS` (``PGSTEADY_PG_VERSIONS=14,18`` narrows the set); with
arguments, ``pg_versions(10, 11)``, on exactly those, skipped (naming the script that
installs it) where one is missing. The test takes ``pg_version`` and asks
``pgsteady_postgres_version(pg_version)`` for its server.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest

from pgsteady import _majors
from pgsteady._extras import needs
from pgsteady.errors import LabError
from pgsteady.lab import _process
from pgsteady.lab.cluster import Cluster, Postgres, make_workdir, versions
from pgsteady.lab.proxy import FaultProxy
from pgsteady.lab.redis_server import RedisServer

# Tests want PgBouncer to retry a failed server login quickly (its default waits 15 s).
TEST_PGBOUNCER_SETTINGS = {"server_login_retry": 1}

SUPPORTED_PG_VERSIONS = _majors.SUPPORTED
"""The majors users run: where a ``pg_versions`` test without arguments runs."""


class FreshDatabase(NamedTuple):
    """A database made for one test."""

    name: str
    dsn: str


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a long run; deselect with -m 'not slow'")
    config.addinivalue_line("markers", "lab: runs a lab scenario on the embedded cluster")
    config.addinivalue_line(
        "markers", "pg_versions(*majors): run once per installed PostgreSQL major (default: "
                   f"{min(SUPPORTED_PG_VERSIONS)}-{max(SUPPORTED_PG_VERSIONS)}; "
                   "PGSTEADY_PG_VERSIONS=14,18 narrows), with fixture pg_version")


def pytest_report_header(config: pytest.Config) -> str:
    try:
        binaries = _process.find_binaries(_session_pg_version())
    except LabError:
        binaries = None
    found = versions(binaries)
    majors = ", ".join(map(str, _process.installed_pg_versions())) or "none"
    return (f"pgsteady lab: {found['postgresql']}; {found['pgbouncer']}; "
            f"PostgreSQL majors installed: {majors}")


def _session_pg_version() -> int | None:
    text = os.environ.get("PGSTEADY_PG_VERSION", "").strip()
    return int(text) if text else None


def _chosen_pg_versions(marker: pytest.Mark) -> list[int]:
    """The majors a ``pg_versions`` test runs on: the marker's own, else the supported ones
    installed here, narrowed by ``PGSTEADY_PG_VERSIONS``."""
    if marker.args:
        return [int(major) for major in marker.args]
    installed = _process.installed_pg_versions()
    majors = [major for major in SUPPORTED_PG_VERSIONS if major in installed]
    if narrow := os.environ.get("PGSTEADY_PG_VERSIONS", "").strip():
        wanted = {int(part) for part in narrow.split(",") if part.strip()}
        majors = [major for major in majors if major in wanted]
    return majors


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("pg_versions")
    if marker is None:
        return
    installed = _process.installed_pg_versions()
    # Module scope: a module's fixtures may build on one major (the lock oracle's schema) and
    # its tests run grouped by major.
    metafunc.parametrize("pg_version", scope="module", argvalues=[
        pytest.param(major, id=f"pg{major}", marks=() if major in installed else
                     pytest.mark.skip(reason=f"PostgreSQL {major} is not installed; "
                                             f"scripts/postgres-versions.sh {major}"))
        for major in _chosen_pg_versions(marker)])


@pytest.fixture(scope="session")
def pgsteady_postgres() -> Iterator[Postgres]:
    """One throwaway PostgreSQL for the whole session.

    Its DSNs name its passfile; ``PGPASSFILE`` is also pointed at it for the session (unless
    already set), so a DSN a test writes by hand (``host=127.0.0.1 port=...``) still logs in.
    """
    who = _process.run_as()
    workdir = make_workdir(None, who, prefix="pgsteady-test-")
    server = Postgres(workdir, who=who, pg_version=_session_pg_version())
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


@pytest.fixture(scope="session")
def pgsteady_postgres_version(
    pgsteady_postgres: Postgres,
) -> Iterator[Callable[[int], Postgres]]:
    """``server(major)``: a PostgreSQL of that major, started on first use and kept for the
    session (one per major: starting one costs a second or two), the session's own for its
    major. Its DSNs name its own passfile."""
    who = _process.run_as()
    servers: dict[int, Postgres] = {pgsteady_postgres.major: pgsteady_postgres}
    started: list[Postgres] = []

    def server(major: int) -> Postgres:
        if major not in servers:
            workdir = make_workdir(None, who, prefix=f"pgsteady-test-pg{major}-")
            made = Postgres(workdir, who=who, pg_version=major)
            started.append(made)
            servers[major] = made.start()
        return servers[major]

    try:
        yield server
    finally:
        for made in started:
            made.stop()
            shutil.rmtree(made.workdir, ignore_errors=True)


@pytest.fixture
def pgsteady_version_database(
    pg_version: int, pgsteady_postgres_version: Callable[[int], Postgres],
) -> Iterator[FreshDatabase]:
    """A new, empty database for this test on the ``pg_versions`` test's major."""
    server = pgsteady_postgres_version(pg_version)
    name = f"t_{uuid.uuid4().hex[:12]}"
    dsn = server.create_database(name)
    try:
        yield FreshDatabase(name, dsn)
    finally:
        server.drop_database(name)


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


@pytest.fixture
def pgsteady_lock_holder() -> Iterator[Callable[..., Any]]:
    """``hold(dsn, table, mode="ACCESS SHARE", ...) -> LockHolder``; all released afterwards
    (:mod:`pgsteady.migrate.testing`). Imported here, on first use: its lock modes come
    with pglast, an extra, and a plugin that fails to load would break every pytest run of
    an application that installed only ``pgsteady``."""
    with needs("cli", "the pgsteady_lock_holder fixture"):
        from pgsteady.migrate.testing import lock_holders  # noqa: PLC0415
    yield from lock_holders()
