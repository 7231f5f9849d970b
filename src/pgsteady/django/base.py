"""The database backend ``ENGINE = "pgsteady.django"``: Django's postgresql backend (psycopg 3),
with pgsteady's session settings on every connection.

Every session carries ``statement_timeout`` (no query abandoned by its caller runs for
hours), ``lock_timeout``, ``idle_in_transaction_session_timeout`` and ``application_name =
service@host:pid`` (who opened it, in ``pg_stat_activity``). How they reach the server depends
on what is in between (``OPTIONS["pgsteady"]["pooler"]``):

- ``direct``: startup ``options`` (``-c lock_timeout=...``), free per query;
- ``session`` (PgBouncer session mode, which refuses startup options): one ``SET`` per
  connection, right after connecting;
- ``transaction`` (PgBouncer transaction mode): a ``SET`` would leak to whichever client gets
  the server connection next, so the settings go with every transaction, ``LOCAL``: in an
  ``atomic()`` block, a ``set_config(..., true)`` opens the transaction; in Django's
  autocommit mode, where each query is its own transaction, the settings travel in the same
  message as the query (one implicit transaction, no extra round trip). Statements that cannot
  run in a transaction block (``CREATE INDEX CONCURRENTLY``, ``VACUUM``) go alone, with the
  role's settings: set those with ``ALTER ROLE ... SET`` as well (docs/django.md).

``application_name`` is a startup parameter in every mode (PgBouncer passes it on).
Behind a transaction pooler, server-side cursors (``QuerySet.iterator()``) are turned off
unless the settings say otherwise: the pooler may hand the cursor's next ``FETCH`` to another
server connection, where it does not exist. ``pooler = "direct"`` against a pooler fails on
connecting with PgBouncer's "unsupported startup parameter"; the error says which pooler to set.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS
from django.db.backends.base.validation import BaseDatabaseValidation
from django.db.backends.postgresql import base as postgresql

from pgsteady.django import _pgsteady as core
from pgsteady.django import checks
from pgsteady.django import options as options_module
from pgsteady.django.options import KEY, Options

log = logging.getLogger("pgsteady.django")

CONNECT_TIMEOUT = 10  # seconds, unless OPTIONS or PGCONNECT_TIMEOUT say otherwise

# Statements PostgreSQL refuses inside a transaction block, a multi-statement message included.
_OUTSIDE_TRANSACTION = re.compile(
    r"\b(concurrently|vacuum|(create|drop|alter)\s+(database|tablespace|subscription|system)|"
    r"reindex\s+(schema|database|system))\b", re.IGNORECASE)


def _settings_sql(options: Options, *, local: bool) -> str:
    """One statement setting every timeout (values are pgsteady's own: ms counts)."""
    flag = "true" if local else "false"
    calls = ", ".join(f"set_config('{name}', '{value}', {flag})"
                      for name, value in options.session.values().items())
    return f"SELECT {calls}"


def per_transaction_cursor(base: type[Any], options: Options) -> type[Any]:
    """A cursor class that gives each transaction the settings, ``LOCAL`` (transaction
    pooling): the first statement of an explicit transaction is preceded by them; a query in
    autocommit mode is sent with them in front, in one message (one implicit transaction),
    and its own result is the one the cursor shows."""
    local = _settings_sql(options, local=True)

    class PerTransactionCursor(base):  # type: ignore[misc]
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            conn = self.connection
            fresh = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            if not fresh or (isinstance(query, str) and _OUTSIDE_TRANSACTION.search(query)):
                return super().execute(query, params, **kwargs)
            if not conn.autocommit:  # this statement opens the transaction: settings first
                super().execute(local)
                return super().execute(query, params, **kwargs)
            if isinstance(query, str) and isinstance(self, psycopg.ClientCursor):
                # Client-side binding sends one simple-protocol message: both statements run
                # in one implicit transaction, so the LOCAL settings hold for the query.
                super().execute(f"{local}; {query}", params, **kwargs)
                self.nextset()
                return self
            with conn.transaction():  # server-side binding: one statement per message
                super().execute(local)
                return super().execute(query, params, **kwargs)

        def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
            conn = self.connection
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                super().executemany(query, params_seq, **kwargs)
                return
            with conn.transaction():
                super().execute(local)
                super().executemany(query, params_seq, **kwargs)

    PerTransactionCursor.__name__ = PerTransactionCursor.__qualname__ = \
        f"PerTransaction{base.__name__}"
    return PerTransactionCursor


class Validation(BaseDatabaseValidation):  # type: ignore[misc]  # Django is untyped
    """The alias's system checks (:mod:`.checks`), those that connect included: Django runs
    them for ``check --database <alias>`` and before ``migrate``."""

    def check(self, **kwargs: Any) -> list[Any]:
        return [*super().check(**kwargs), *checks.for_alias(self.connection, databases=True)]


class DatabaseWrapper(postgresql.DatabaseWrapper):  # type: ignore[misc]  # Django is untyped
    """Django's PostgreSQL backend with pgsteady's session settings (see the module's doc)."""

    validation_class = Validation

    def __init__(self, settings_dict: dict[str, Any], alias: str = DEFAULT_DB_ALIAS) -> None:
        super().__init__(settings_dict, alias)
        # Django makes the backend while it imports models (django.setup()), before any
        # command could catch an error: a wrong OPTIONS["pgsteady"] is kept, reported by the
        # check pgsteady.E004 and by the commands in one line, and raised on connecting.
        self.pgsteady_error = ""
        try:
            self.pgsteady: Options = options_module.parse(
                alias, (settings_dict.get("OPTIONS") or {}).get(KEY))
        except ImproperlyConfigured as exc:
            self.pgsteady_error = str(exc)
            self.pgsteady = options_module.parse(alias, None)
        if self.pgsteady.pooler == "transaction":
            # Django's own advice under transaction pooling; an explicit False is kept (and
            # reported by the check pgsteady.E002).
            settings_dict.setdefault("DISABLE_SERVER_SIDE_CURSORS", True)

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        try:
            return super().get_new_connection(conn_params)
        except psycopg.OperationalError as exc:
            if self.pgsteady.pooler != "direct" or not checks.pooler_refused(exc):
                raise
            message = " ".join(str(exc).split())
            raise psycopg.OperationalError(
                f"{message}; DATABASES[{self.alias!r}] has pooler 'direct' but "
                f"{checks.REFUSED}: {checks.POOLER_HINT}") from None

    def get_connection_params(self) -> dict[str, Any]:
        if self.pgsteady_error:  # never connect with settings other than those asked for
            raise ImproperlyConfigured(self.pgsteady_error)
        params: dict[str, Any] = super().get_connection_params()
        params.pop(KEY, None)
        session = self.pgsteady.session
        extra = session.connect_kwargs()
        if "application_name" not in (self.settings_dict.get("OPTIONS") or {}):
            # service@host:pid of the process connecting (after a fork, the worker's own)
            params["application_name"] = core.SessionSettings(
                service=session.service).application_name[:63]
        if "connect_timeout" not in params and not os.environ.get("PGCONNECT_TIMEOUT"):
            params["connect_timeout"] = CONNECT_TIMEOUT  # libpq's own: none (minutes of SYNs)
        if "options" in extra:
            params["options"] = " ".join(filter(None, [params.get("options"), extra["options"]]))
        if session.pooler != "direct":
            params["prepare_threshold"] = None  # PgBouncer < 1.21: no named statements
        if session.pooler == "transaction":
            params["cursor_factory"] = per_transaction_cursor(params["cursor_factory"],
                                                              self.pgsteady)
        return params

    def init_connection_state(self) -> None:
        super().init_connection_state()
        if self.pgsteady.pooler != "session":
            return
        # PgBouncer session mode refuses startup options: one SET, the connection stays ours.
        with self.connection.cursor() as cursor:
            cursor.execute(_settings_sql(self.pgsteady, local=False))
        if not self.get_autocommit():
            self.connection.commit()
