"""A Steady call whose statement carries a secret parameter and fails: pgsteady's own
exception text and the log records pgsteady emits never carry the parameters (SQLAlchemy's
error text does: "[parameters: ...]"; that stays in ``__cause__``, which the docs say to
quiet with ``hide_parameters=True``)."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from typing import Any

import psycopg
import pytest
from sqlalchemy import text

from pgsteady.errors import PgsteadyError, QueryFailed
from pgsteady.lab.proxy import FaultProxy

SECRET = "s3cret-token-4242"  # noqa: S105 - the secret the test looks for


def _formatted(records: list[logging.LogRecord]) -> str:
    formatter = logging.Formatter("%(name)s %(message)s")
    return "\n".join(formatter.format(r) for r in records if r.name.startswith("pgsteady"))


def _scalar(facade: Any, statement: str, params: dict[str, Any], deadline: float) -> Any:
    """``scalar`` with parameters on a Steady or (through its loop) an AsyncSteady."""
    call = facade.steady.scalar(text(statement), params, deadline=deadline)
    return facade._do(call) if hasattr(facade, "_do") else call


def _cut_when_running(proxy: FaultProxy, dsn: str, after: float) -> threading.Thread:
    def cut() -> None:
        with psycopg.connect(dsn, autocommit=True) as admin:
            for _ in range(1000):
                if admin.execute("select 1 from pg_stat_activity where state = 'active' "
                                 "and wait_event = 'PgSleep' and query ilike "
                                 "'%%insert into t%%'").fetchone():
                    time.sleep(after)  # a caller with a shorter deadline has left by then
                    proxy.reset()
                    return
                time.sleep(0.01)
    thread = threading.Thread(target=cut, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("leave", [False, True], ids=["waits", "leaves"])
def test_a_failed_call_with_a_secret_parameter_keeps_it_out_of_pgsteady_text(  # noqa: PLR0917
        make_steady, pgsteady_database, pgsteady_postgres, pgsteady_proxy, caplog, leave):
    """The connection is cut under an INSERT whose parameter is a secret: the caller waiting
    gets an error whose str(), repr() and traceback hold no secret (SQLAlchemy's "[parameters:
    ...]" text is not in its chain); a caller that left at its deadline
    gets a pgsteady.runner warning that holds none either (formatted whole, traceback
    included)."""
    with psycopg.connect(pgsteady_database.dsn, autocommit=True) as conn:
        conn.execute("create table t (id int, token text)")
    proxied = pgsteady_postgres.dsn(pgsteady_database.name, port=pgsteady_proxy.port)
    steady = make_steady(proxied)
    cutter = _cut_when_running(pgsteady_proxy, pgsteady_database.dsn, 0.6 if leave else 0.0)
    statement = "insert into t select 1, cast(:token as text) from pg_sleep(1.5) returning id"
    with caplog.at_level(logging.DEBUG, logger="pgsteady"):
        with pytest.raises(PgsteadyError) as info:
            _scalar(steady, statement, {"token": SECRET}, deadline=0.3 if leave else 10)
        cutter.join(15)
        if leave:
            for _ in range(200):  # the worker finishes the job after the caller left
                if steady.stats().failed:
                    break
                time.sleep(0.05)
    error = info.value
    if not leave:
        assert isinstance(error, QueryFailed)
    assert SECRET not in str(error) and SECRET not in repr(error)
    # Logged with its traceback (log.exception), the chain shows the driver's error, not
    # SQLAlchemy's wrapper with its "[parameters: ...]".
    assert SECRET not in "".join(traceback.format_exception(error))
    assert SECRET not in _formatted(caplog.records)
    if leave:
        assert "may have been applied" in _formatted(caplog.records)
