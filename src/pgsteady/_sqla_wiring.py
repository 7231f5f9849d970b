"""How a steady object gives an engine's connections the session settings of their pooler.

SQLAlchemy's engine events carry them (see :mod:`pgsteady.sqlalchemy`): startup ``options``
when direct, one ``SET`` per new connection behind PgBouncer in session mode, and behind
PgBouncer in transaction mode ``set_config(..., true)`` in front of each statement (a cursor
class) or at the start of each of a job's transactions (a Session event). Kept apart from the
runners so that the two steady classes share one copy.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import psycopg
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from pgsteady import _fork, _setup
from pgsteady.errors import UsageError
from pgsteady.settings import SessionSettings

log = logging.getLogger("pgsteady.sqlalchemy")

# Engines whose connections a live steady object configures: one set of settings each.
_WIRED: weakref.WeakKeyDictionary[Engine, str] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
# Session.info key: the job's first transaction has its settings (later ones get them too).
BEGUN = "pgsteady.begun"


class Wiring:
    """The engine events that give every connection the session settings of its pooler."""

    def __init__(self, engine: Engine, settings: SessionSettings, connect_timeout: float,
                 owner: str) -> None:
        with _LOCK:
            if engine in _WIRED:
                raise UsageError(f"this engine already carries the session settings of "
                                 f"{_WIRED[engine]}; share that one (or close it first)")
            _WIRED[engine] = owner
        self.engine = engine
        self.settings = settings
        self.local = settings.set_query() if settings.pooler == "transaction" else None
        self.prefixed: type[psycopg.AsyncClientCursor[Any]] | None = None
        self.prefixed_sync: type[psycopg.ClientCursor[Any]] | None = None
        if settings.pooler == "transaction":
            self.prefixed, self.prefixed_sync = _prefixed_cursors(
                _setup.transaction_prefix(settings))
        self._startup = settings.connect_kwargs()
        self._connect_timeout = str(max(2, round(connect_timeout)))
        event.listen(engine, "do_connect", self._do_connect)
        event.listen(engine, "connect", _remember)
        if settings.pooler == "session":
            event.listen(engine, "connect", self._on_connect)
        pool: Any = engine.pool
        if callable(getattr(pool, "checkedin", None)) and pool.checkedin() + pool.checkedout():
            log.warning("%s: the engine already has connections, opened without pgsteady's "
                        "session settings; make the steady object right after the engine "
                        "(or call engine.dispose())", owner)

    def _do_connect(self, dialect: Any, _record: Any, cargs: Any,
                    cparams: dict[str, Any]) -> Any:
        startup = dict(self._startup)
        options = startup.pop("options", None)
        if options:  # the user's own -c settings come after ours, so theirs win
            cparams["options"] = f"{options} {cparams['options']}".strip() \
                if cparams.get("options") else options
        cparams.update(startup)
        if "connect_timeout" not in cparams and not os.environ.get("PGCONNECT_TIMEOUT", "").strip():
            cparams["connect_timeout"] = self._connect_timeout
        # psycopg's connection attempts, made so that a fork never lands inside one (see
        # pgsteady._fork): the async dialect takes the connect function, the sync one takes
        # the connection from this event.
        if getattr(dialect, "driver", None) != "psycopg":
            return None
        if getattr(dialect, "is_async", False):
            cparams.setdefault("async_creator_fn",
                               _fork.fork_safe(psycopg.AsyncConnection).connect)
            return None
        return _fork.fork_safe(psycopg.Connection).connect(*cargs, **cparams)

    def _on_connect(self, dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(*self.settings.set_query())
        finally:
            cursor.close()
        dbapi_connection.commit()

    @contextlib.contextmanager
    def prefixing(self, raw: Any) -> Iterator[None]:
        """Behind a transaction pooler, ``raw`` (the psycopg connection under a job's one
        Core statement) sends the settings in front of each statement while in the block."""
        prefixed = self.prefixed if isinstance(raw, psycopg.AsyncConnection) \
            else self.prefixed_sync
        if prefixed is None:
            yield
            return
        factory, raw.cursor_factory = raw.cursor_factory, prefixed
        try:
            yield
        finally:
            raw.cursor_factory = factory

    def sessions(self, factory: Any) -> None:
        """Behind a transaction pooler, give every later transaction of a job's session the
        settings too: ``fn`` may commit (or roll back) and go on, and the settings were LOCAL
        to the transaction before. The job's first transaction gets them from ``_attempt``,
        after the checkout (so a job dropped there sends nothing)."""
        if self.local is not None:
            event.listen(factory, "after_begin", self._after_begin)

    def _after_begin(self, session: Session, _transaction: Any, connection: Any) -> None:
        if session.info.get(BEGUN) and self.local is not None:
            connection.exec_driver_sql(*self.local)

    def after_fork(self) -> None:
        """In a forked child (see :mod:`pgsteady._fork`): the engine forgets the parent's
        connections without closing them, as ``engine.dispose(close=False)`` does; those it
        opened before this object hooked its events are silenced first, as ours were."""
        self.settings = self.settings.for_this_process()  # labelled with the child's pid
        self._startup = self.settings.connect_kwargs()
        pool: Any = self.engine.pool
        queue = getattr(getattr(pool, "_pool", None), "queue", ())
        for record in list(queue):
            dbapi = getattr(record, "dbapi_connection", None)
            if dbapi is not None:
                _fork.silence(getattr(dbapi, "driver_connection", dbapi))
        _fork.keep(pool)
        self.engine.dispose(close=False)

    def remove(self) -> None:
        with _LOCK:
            if _WIRED.pop(self.engine, None) is None:
                return
        event.remove(self.engine, "do_connect", self._do_connect)
        event.remove(self.engine, "connect", _remember)
        if self.settings.pooler == "session":
            event.remove(self.engine, "connect", self._on_connect)


def _remember(dbapi_connection: Any, _record: Any) -> None:
    """Every connection the engine opens, listed to be silenced in a forked child."""
    _fork.remember(getattr(dbapi_connection, "driver_connection", dbapi_connection))


def _prefixed_cursors(prefix: str) -> tuple[type[psycopg.AsyncClientCursor[Any]],
                                            type[psycopg.ClientCursor[Any]]]:
    """Cursor classes (async, sync) sending ``prefix`` (the ``set_config(..., true)`` calls)
    in front of each statement as one simple Query, as the runners do: PostgreSQL runs the
    two as one implicit transaction, so the settings hold for the statement alone and the job
    costs one round trip. SQLAlchemy then reads the statement's own result."""
    if "%" in prefix:
        raise UsageError(f"session settings cannot contain '%': {prefix!r}")

    def text(query: Any) -> str:
        if not isinstance(query, str):
            raise UsageError("pgsteady sends SQLAlchemy's statements as text")
        return prefix + query

    # Each execution its own implicit transaction would lose executemany's all-or-nothing;
    # a one-statement helper takes one set of parameters.
    many = "one-statement helpers take one set of parameters; use run() for many"

    class _Prefixed(psycopg.AsyncClientCursor[Any]):
        async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            await super().execute(text(query), params, **kwargs)
            self.nextset()
            return self

        async def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
            raise UsageError(many)

    class _PrefixedSync(psycopg.ClientCursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            super().execute(text(query), params, **kwargs)
            self.nextset()
            return self

        def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
            raise UsageError(many)

    return _Prefixed, _PrefixedSync
