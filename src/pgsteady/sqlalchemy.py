"""``Steady`` / ``AsyncSteady``: pgsteady's deadline rules over a SQLAlchemy engine.

A caller's deadline ends only the caller's wait, never the query: an ``asyncio.timeout``
around ``session.execute`` cancels the query mid-flight, SQLAlchemy then closes that
connection, and behind PgBouncer every such close destroys a server connection (the pool
drain, docs/outages.md). Here each call is a job: ``fn(session)`` runs in one transaction on a
task (or worker thread) the steady object owns, commits when ``fn`` returns, rolls back when
it raises, and only then gives its connection back to the pool. A job whose caller left
before it started is dropped untouched; the backlog is bounded (``Overloaded``)::

    engine = create_async_engine(url_from_dsn(dsn), pool_size=4, max_overflow=0)
    steady = AsyncSteady(engine, pooler="transaction", service="api")
    name = await steady.scalar(select(User.name).where(User.id == 7), deadline=0.05)
    moved = await steady.run(transfer, deadline=0.2)   # async def transfer(session) -> T

``DeadlineExceeded.phase`` says where the time went: ``queued`` (waiting for one of the
``concurrency`` slots, by default the engine's ``pool_size``, so no job ever waits inside
SQLAlchemy's pool), ``connecting`` (the checkout: the pool opening a connection) or
``running``. The rules themselves are :mod:`pgsteady._core`'s, shared with ``Database``.

Session settings travel as ``Database`` sends them (:class:`~pgsteady.settings.SessionSettings`),
wired into the engine's events: ``direct``: startup ``options``; PgBouncer ``session``: a
``SET`` on each new connection (the pool's ``connect`` event); PgBouncer ``transaction``:
``set_config(..., true)`` inside each job's transaction, and ``prepare_threshold=None``
(PgBouncer 1.18 cannot route prepared statements). ``application_name`` is always a startup
parameter. Create the steady object before the engine's first connection. Made before a fork
(gunicorn ``--preload``, Celery prefork), each child resets the engine as
``engine.dispose(close=False)`` does and never touches its parent's connections.

This module is the face; ``AsyncSteady`` lives in :mod:`pgsteady._sqla_async`, the one
source, from which ``scripts/async_to_sync.py`` generates ``Steady``
(:mod:`pgsteady._sqla_sync`); what both share is :mod:`pgsteady._sqla_jobs`.
"""

from __future__ import annotations

from psycopg.conninfo import conninfo_to_dict

from pgsteady._extras import needs

with needs("sqlalchemy", "pgsteady.sqlalchemy (Steady, AsyncSteady)"):
    from sqlalchemy import URL

from pgsteady import _setup
from pgsteady._sqla_async import AsyncSteady
from pgsteady._sqla_sync import Steady

__all__ = ["AsyncSteady", "Steady", "url_from_dsn"]


def url_from_dsn(dsn: str, *, driver: str = "psycopg") -> URL:
    """A SQLAlchemy URL for a libpq DSN (``host=... dbname=...`` or ``postgresql://...``).

    Parameters a URL has no place for (``passfile``, ``sslmode``, a socket directory, several
    hosts) ride along as query arguments, which the psycopg dialect hands back to libpq."""
    _setup.check_conninfo(dsn)
    params = {key: str(value) for key, value in conninfo_to_dict(dsn).items()}
    host, port = params.get("host", ""), params.get("port", "")
    plain = bool(host) and not host.startswith("/") and "," not in host + port
    if plain:
        params.pop("host")
    number = params.pop("port") if plain and port.isdigit() else None
    return URL.create(
        f"postgresql+{driver}", username=params.pop("user", None),
        password=params.pop("password", None), host=host if plain else None,
        port=int(number) if number else None, database=params.pop("dbname", None),
        query=params)
