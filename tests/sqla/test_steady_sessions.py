"""Steady / AsyncSteady: session settings per pooler mode, the one-statement helpers, the
caller's own cancellation, and mistakes refused up front — on real PostgreSQL and PgBouncer."""

from __future__ import annotations

import asyncio
import os
import socket
import time

import psycopg
import pytest
from sqlalchemy import Integer, String, column, create_engine, insert, select, table, text, update
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from sqlalchemy.pool import NullPool

from pgsteady.errors import CannotConnect, DatabaseClosed, DeadlineExceeded, UsageError
from pgsteady.sqlalchemy import AsyncSteady, Steady, url_from_dsn

SETTINGS = ("select concat_ws('|', current_setting('statement_timeout'), "
            "current_setting('lock_timeout'), current_setting('idle_in_transaction_session_timeout'), "
            "current_setting('application_name'))")
ITEMS = table("items", column("id", Integer), column("name", String))


def _label() -> str:
    return f"orders@{socket.gethostname()}:{os.getpid()}"[:63]


@pytest.mark.parametrize("mode", ["direct", "session", "transaction"])
def test_timeouts_and_label_in_every_mode(make_steady, pgsteady_stack, pgsteady_database, mode):
    """Every job sees statement/lock/idle timeouts and application_name service@host:pid."""
    dsn = pgsteady_database.dsn if mode == "direct" else \
        pgsteady_stack(pool_mode=mode, pool_size=2).pooled_dsn(pgsteady_database.name)
    steady = make_steady(dsn, pooler=mode, service="orders", statement_timeout=7,
                         lock_timeout=0.25, idle_in_transaction_timeout=9)
    assert steady.run_sql(SETTINGS) == f"7s|250ms|9s|{_label()}"


def test_transaction_pooling_sets_local_settings_inside_the_job(pgsteady_stack,
                                                                pgsteady_database):
    """Behind PgBouncer in transaction mode, SHOW inside a job gives pgsteady's settings, a
    plain client on the same single server connection the server's defaults, and psycopg
    never prepares statements (PgBouncer 1.18 could not route them)."""
    cluster = pgsteady_stack(pool_size=1, pool_mode="transaction")
    dsn = cluster.pooled_dsn(pgsteady_database.name)
    engine = create_engine(url_from_dsn(dsn), pool_size=1, max_overflow=0)
    with Steady(engine, pooler="transaction", service="orders", lock_timeout=0.25) as steady:
        def inside(session: Session) -> tuple[object, ...]:
            driver = session.connection().connection.driver_connection
            return (session.execute(text("show lock_timeout")).scalar(),
                    session.execute(text("show application_name")).scalar(),
                    driver.prepare_threshold)  # type: ignore[union-attr]

        assert steady.run(inside, deadline=5) == ("250ms", _label(), None)
        for i in range(12):  # past psycopg's default prepare_threshold of 5
            assert steady.scalar(text("select :i"), {"i": i}, deadline=5) == i
        with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as other:
            assert other.execute("show lock_timeout").fetchone() == ("0",)
    engine.dispose()


def test_one_statement_helpers_return_values_usable_after_the_job(pgsteady_database):
    """scalar, scalars and execute (rows and rowcount) on both engines, typed statements."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table items (id int primary key, name text)")
    url = url_from_dsn(pgsteady_database.dsn)
    engine = create_engine(url, pool_size=1, max_overflow=0)
    with Steady(engine) as steady:
        steady.execute(insert(ITEMS).values(id=1, name="a"), deadline=5)
        inserted = steady.execute(text("insert into items values (2, 'b')"), deadline=5)
        assert inserted.rowcount == 1  # type: ignore[attr-defined]
        assert steady.scalars(select(ITEMS.c.name).order_by(ITEMS.c.id), deadline=5) == ["a", "b"]
        rows = steady.execute(select(ITEMS.c.id, ITEMS.c.name).order_by(ITEMS.c.id), deadline=5)
        assert [tuple(r) for r in rows] == [(1, "a"), (2, "b")]
    engine.dispose()

    async def scenario() -> None:
        aengine = create_async_engine(url, pool_size=1, max_overflow=0)
        async with AsyncSteady(aengine) as steady:
            changed = await steady.execute(update(ITEMS).values(name="c"), deadline=5)
            assert changed.rowcount == 2  # type: ignore[attr-defined]
            assert await steady.scalar(select(ITEMS.c.name).where(ITEMS.c.id == 2),
                                       deadline=5) == "c"
            assert await steady.scalars(select(ITEMS.c.id), deadline=5) == [1, 2]
            rows = await steady.execute(select(ITEMS.c.id).order_by(ITEMS.c.id), deadline=5)
            assert rows.all() == [(1,), (2,)]
        await aengine.dispose()

    asyncio.run(scenario())


def test_caller_cancelled_by_asyncio_timeout_leaves_the_job_to_commit(pgsteady_stack,
                                                                      pgsteady_database):
    """An asyncio.timeout around steady.run ends only the wait: the transaction commits and
    PgBouncer never sees a client leave mid-query (no not-ready closure)."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table items (id int primary key, name text)")
    cluster = pgsteady_stack(pool_size=1, pool_mode="transaction")
    reader = cluster.pgbouncer.log_reader()
    url = url_from_dsn(cluster.pooled_dsn(pgsteady_database.name))

    async def slow_insert(session: AsyncSession) -> None:
        await session.execute(text("select pg_sleep(0.3)"))
        await session.execute(insert(ITEMS).values(id=1, name="late"))

    async def scenario() -> None:
        engine = create_async_engine(url, pool_size=1, max_overflow=0)
        async with AsyncSteady(engine, pooler="transaction") as steady:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await steady.run(slow_insert, deadline=5)
            end = time.monotonic() + 10
            while steady.stats().in_flight and time.monotonic() < end:
                await asyncio.sleep(0.02)
            stats = steady.stats()
            assert (stats.abandoned_completions, stats.deadline_exceeded_running) == (1, 1)
            assert await steady.scalar(select(ITEMS.c.name), deadline=5) == "late"
        await engine.dispose()

    asyncio.run(scenario())
    time.sleep(0.3)  # PgBouncer's last log lines
    assert reader.counts().total["not_ready"] == 0


def test_mistakes_are_refused_when_the_steady_object_is_made(pgsteady_database):
    """Wrong engine kind, a pool without a size, a second steady object on one engine and a
    non-psycopg driver are UsageErrors before anything connects."""
    url = url_from_dsn(pgsteady_database.dsn)
    engine = create_engine(url, pool_size=1, max_overflow=0)
    with pytest.raises(UsageError, match="AsyncEngine"):
        AsyncSteady(engine)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="concurrency"):
        Steady(create_engine(url, poolclass=NullPool))
    Steady(create_engine(url, poolclass=NullPool), concurrency=2).close()
    with Steady(engine), pytest.raises(UsageError, match="already"):
        Steady(engine)
    Steady(engine).close()  # the first one closed: its events went with it
    with pytest.raises(UsageError, match="psycopg"):
        Steady(create_engine("sqlite://"))
    with pytest.raises(UsageError, match="pooler"):
        Steady(engine, pooler="statement")


def test_url_from_dsn_keeps_every_libpq_parameter():
    """Host, port, user and database go in the URL; passfile, sslmode and a socket dir in its
    query, which the psycopg dialect hands back to libpq."""
    url = url_from_dsn("host=db.internal port=6432 dbname=orders user=api sslmode=require "
                       "passfile=/run/pgpass")
    assert (url.drivername, url.host, url.port, url.database, url.username) == \
        ("postgresql+psycopg", "db.internal", 6432, "orders", "api")
    assert dict(url.query) == {"sslmode": "require", "passfile": "/run/pgpass"}
    socket_url = url_from_dsn("host=/var/run/postgresql dbname=orders")
    assert socket_url.host is None and socket_url.query["host"] == "/var/run/postgresql"
    with pytest.raises(UsageError):
        url_from_dsn("host=x port")


class _Base(DeclarativeBase):
    pass


class _Item(_Base):
    __tablename__ = "items"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]


def test_async_one_statement_behind_a_transaction_pooler(pgsteady_stack, pgsteady_database):
    """AsyncSteady's one-statement helpers behind PgBouncer in transaction mode: each
    statement sees pgsteady's local settings, they do not leak to the next client of the
    single server connection, and an ORM statement still returns entities."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table items (id int primary key, name text)")
        conn.execute("insert into items values (1, 'a')")
    cluster = pgsteady_stack(pool_size=1, pool_mode="transaction")
    dsn = cluster.pooled_dsn(pgsteady_database.name)

    async def scenario() -> None:
        engine = create_async_engine(url_from_dsn(dsn), pool_size=1, max_overflow=0)
        async with AsyncSteady(engine, pooler="transaction", service="orders",
                               lock_timeout=0.25) as steady:
            assert await steady.scalar(text(SETTINGS), deadline=5) == \
                f"30s|250ms|1min|{_label()}"
            for i in range(12):  # past psycopg's default prepare_threshold of 5
                assert await steady.scalar(text("select :i"), {"i": i}, deadline=5) == i
            assert await steady.scalars(select(ITEMS.c.name), deadline=5) == ["a"]
            item = await steady.scalar(select(_Item).where(_Item.id == 1), deadline=5)
            assert isinstance(item, _Item) and item.name == "a"
        await engine.dispose()

    asyncio.run(scenario())
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as other:
        assert other.execute("show lock_timeout").fetchone() == ("0",)


def test_async_statement_past_its_deadline_commits_and_closes_nothing(pgsteady_stack,
                                                                      pgsteady_database):
    """A one-statement helper whose caller's deadline passes mid-statement: the caller gets
    DeadlineExceeded, the write commits, PgBouncer closes no server connection."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table items (id int primary key, name text)")
    cluster = pgsteady_stack(pool_size=1, pool_mode="transaction")
    reader = cluster.pgbouncer.log_reader()
    url = url_from_dsn(cluster.pooled_dsn(pgsteady_database.name))

    async def scenario() -> None:
        engine = create_async_engine(url, pool_size=1, max_overflow=0)
        async with AsyncSteady(engine, pooler="transaction") as steady:
            with pytest.raises(DeadlineExceeded) as info:
                await steady.execute(text("insert into items select 1, 'late' "
                                          "from pg_sleep(0.3)"), deadline=0.05)
            assert info.value.phase == "running"
            end = time.monotonic() + 10
            while steady.stats().in_flight and time.monotonic() < end:
                await asyncio.sleep(0.02)
            assert steady.stats().abandoned_completions == 1
            assert await steady.scalar(select(ITEMS.c.name), deadline=5) == "late"
        await engine.dispose()

    asyncio.run(scenario())
    time.sleep(0.3)  # PgBouncer's last log lines
    assert reader.counts().total["not_ready"] == 0


def test_execute_takes_an_orm_bulk_insert(pgsteady_database):
    """An ORM bulk INSERT (``insert(Model)`` with a list of rows) through ``execute``: its
    result has no rows to buffer, the rows commit (it raised NotImplementedError from
    SQLAlchemy's freeze() and rolled back)."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table items (id int primary key, name text)")
    url = url_from_dsn(pgsteady_database.dsn)
    rows = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    engine = create_engine(url, pool_size=1, max_overflow=0)
    with Steady(engine) as steady:
        steady.execute(insert(_Item), rows, deadline=5)  # type: ignore[arg-type]
        assert steady.scalars(select(_Item.name).order_by(_Item.id), deadline=5) == ["a", "b"]
    engine.dispose()

    async def scenario() -> None:
        aengine = create_async_engine(url, pool_size=1, max_overflow=0)
        async with AsyncSteady(aengine) as steady:
            more = [{"id": 3, "name": "c"}, {"id": 4, "name": "d"}]
            await steady.execute(insert(_Item), more, deadline=5)  # type: ignore[arg-type]
            assert await steady.scalars(select(_Item.id).order_by(_Item.id), deadline=5) == \
                [1, 2, 3, 4]
        await aengine.dispose()

    asyncio.run(scenario())


def test_transaction_pooling_settings_hold_after_fn_commits_itself(pgsteady_stack,
                                                                   pgsteady_database):
    """Behind PgBouncer in transaction mode, a fn that calls session.commit() (or rollback())
    and goes on still runs its next transaction under pgsteady's settings: they were LOCAL to
    the first one, so the rest of fn ran with no lock_timeout or statement_timeout."""
    cluster = pgsteady_stack(pool_size=1, pool_mode="transaction")
    url = url_from_dsn(cluster.pooled_dsn(pgsteady_database.name))
    show = text("show lock_timeout")

    def work(session: Session) -> list[object]:
        seen = [session.execute(show).scalar()]
        session.commit()
        seen.append(session.execute(show).scalar())
        session.rollback()
        seen.append(session.execute(show).scalar())
        return seen

    engine = create_engine(url, pool_size=1, max_overflow=0)
    with Steady(engine, pooler="transaction", lock_timeout=0.25) as steady:
        assert steady.run(work, deadline=5) == ["250ms"] * 3
    engine.dispose()

    async def awork(session: AsyncSession) -> list[object]:
        seen = [(await session.execute(show)).scalar()]
        await session.commit()
        seen.append((await session.execute(show)).scalar())
        return seen

    async def scenario() -> None:
        aengine = create_async_engine(url, pool_size=1, max_overflow=0)
        async with AsyncSteady(aengine, pooler="transaction", lock_timeout=0.25) as steady:
            assert await steady.run(awork, deadline=5) == ["250ms"] * 2
        await aengine.dispose()

    asyncio.run(scenario())


def test_a_closed_steady_object_says_what_is_closed(make_steady, pgsteady_database):
    db = make_steady(pgsteady_database.dsn)
    assert db.scalar("select 1") == 1
    if isinstance(db.steady, Steady):
        db.steady.close()
    else:
        db._do(db.steady.aclose())
    with pytest.raises(DatabaseClosed, match=f"the {type(db.steady).__name__} is closed"):
        db.scalar("select 1")


def test_sync_one_statement_behind_a_transaction_pooler(pgsteady_stack, pgsteady_database):
    """Steady's one-statement helpers run as AsyncSteady's do: a Core statement alone, in
    autocommit, its settings in front of it in one message; an ORM one through a Session."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table items (id int primary key, name text)")
        conn.execute("insert into items values (1, 'a')")
    cluster = pgsteady_stack(pool_size=1, pool_mode="transaction")
    dsn = cluster.pooled_dsn(pgsteady_database.name)
    engine = create_engine(url_from_dsn(dsn), pool_size=1, max_overflow=0)
    with Steady(engine, pooler="transaction", service="orders", lock_timeout=0.25) as steady:
        assert steady.scalar(text(SETTINGS), deadline=5) == f"30s|250ms|1min|{_label()}"
        for i in range(12):  # past psycopg's default prepare_threshold of 5
            assert steady.scalar(text("select :i"), {"i": i}, deadline=5) == i
        assert steady.scalars(select(ITEMS.c.name), deadline=5) == ["a"]
        item = steady.scalar(select(_Item).where(_Item.id == 1), deadline=5)
        assert isinstance(item, _Item) and item.name == "a"
    engine.dispose()
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as other:
        assert other.execute("show lock_timeout").fetchone() == ("0",)


def test_statements_that_refuse_a_transaction_run_on_both_engines(make_steady,
                                                                  pgsteady_database):
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table swept (id int)")
    db = make_steady(pgsteady_database.dsn)
    if isinstance(db.steady, Steady):
        db.steady.execute(text("vacuum swept"), deadline=10)
    else:
        db._do(db.steady.execute(text("vacuum swept"), deadline=10))
    with psycopg.connect(pgsteady_database.dsn) as conn:
        row = conn.execute("select vacuum_count from pg_stat_user_tables "
                           "where relname = 'swept'").fetchone()
    assert row is not None and row[0] >= 0  # the statement ran: no "inside a transaction"


def test_a_lookup_that_cannot_connect_fails_and_never_returns_none(make_steady):
    """A one-statement lookup on a server that refuses the connection raises CannotConnect:
    AsyncSteady's used to return None (its connection was opened outside the attempt)."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    db = make_steady(f"host=127.0.0.1 port={port} dbname=x user=x connect_timeout=2")
    with pytest.raises(CannotConnect):
        db.scalar("select 1")
    assert db.stats().failed == 1
