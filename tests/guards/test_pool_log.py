"""psycopg_pool's warnings during a real PostgreSQL restart: the first of each kind, then
one per REPEAT_EVERY seconds, not thousands (the filter Database installs)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import shutil
import time
from collections.abc import Iterator

import pytest

from pgsteady import AsyncDatabase, Database
from pgsteady._poollog import POOL_LOGGER, REPEAT_EVERY, RepeatFilter
from pgsteady.errors import PgsteadyError
from pgsteady.lab import _process
from pgsteady.lab.cluster import Postgres, make_workdir

DOWN_FOR = 3.0


@pytest.fixture
def own_server() -> Iterator[Postgres]:
    """A PostgreSQL of this test's own, to stop and start without touching the session's."""
    who = _process.run_as()
    server = Postgres(make_workdir(None, who), who=who)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


@pytest.fixture
def fresh_filter() -> Iterator[None]:
    """No RepeatFilter from an earlier test: its quiet periods would hide this test's."""
    logger = logging.getLogger(POOL_LOGGER)

    def drop() -> None:
        for old in [f for f in logger.filters if isinstance(f, RepeatFilter)]:
            logger.removeFilter(old)

    drop()
    yield
    drop()


def _pool_warnings(caplog: pytest.LogCaptureFixture) -> collections.Counter[str]:
    return collections.Counter(str(r.msg).split(" (")[0] for r in caplog.records
                               if r.name == "psycopg.pool" and r.levelno >= logging.WARNING)


@pytest.mark.parametrize("kind", [Database, AsyncDatabase])
def test_a_postgres_restart_logs_each_pool_warning_once(own_server, caplog, kind,
                                                         fresh_filter):
    """PostgreSQL stopped for 3 s under a pool of 4 that keeps working: each kind of
    psycopg.pool warning reaches the log once (the window is shorter than REPEAT_EVERY),
    and the pool works again after the start."""
    assert DOWN_FOR < REPEAT_EVERY
    dsn = own_server.dsn(connect_timeout="1")

    def outage(query: object) -> None:
        own_server.stop(mode="immediate")
        end = time.monotonic() + DOWN_FOR
        while time.monotonic() < end:
            query()
            time.sleep(0.005)
        own_server.start()

    with caplog.at_level(logging.INFO, logger="psycopg.pool"):
        if kind is Database:
            with Database(dsn, pool_size=4, connect_timeout=1) as db:
                db.wait(10)

                def query() -> None:
                    with contextlib.suppress(PgsteadyError):  # the outage is the point
                        db.fetchone("select 1", deadline=0.2)

                outage(query)
                db.wait(20)
                assert db.fetchone("select 1", deadline=10) == (1,)
        else:
            async def main() -> None:
                async with AsyncDatabase(dsn, pool_size=4, connect_timeout=1) as adb:
                    await adb.wait(10)
                    own_server.stop(mode="immediate")
                    end = time.monotonic() + DOWN_FOR
                    while time.monotonic() < end:
                        with contextlib.suppress(PgsteadyError):
                            await adb.fetchone("select 1", deadline=0.2)
                        await asyncio.sleep(0.005)
                    own_server.start()
                    await adb.wait(20)
                    assert await adb.fetchone("select 1", deadline=10) == (1,)
            asyncio.run(main())
    counts = _pool_warnings(caplog)
    assert counts, "the restart should have made the pool warn"
    assert max(counts.values()) == 1, counts


def test_repeats_come_back_once_per_period_with_a_count(caplog):
    """Of 50 identical warnings in one period one is logged; the first after the period
    says how many were left out, with its arguments still formatted."""
    logger = logging.getLogger("pgsteady.test.repeats")
    logger.addFilter(RepeatFilter(every=0.2))
    with caplog.at_level(logging.INFO, logger=logger.name):
        for i in range(50):
            logger.warning("error connecting in %r: %s", "pool-1", i)
        logger.info("not a warning: %s", "always logged")
        time.sleep(0.25)
        logger.warning("error connecting in %r: %s", "pool-1", "last")
    assert [r.getMessage() for r in caplog.records] == [
        "error connecting in 'pool-1': 0",
        "not a warning: always logged",
        "error connecting in 'pool-1': last (49 more like it in the last 0.2 s not logged)"]
