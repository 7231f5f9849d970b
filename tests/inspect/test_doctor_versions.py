"""doctor's advice that depends on the server's major, on real servers either side of it."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator

import psycopg
import pytest

from pgsteady.cli import main
from pgsteady.lab import _process
from pgsteady.lab.cluster import Postgres, Setting, make_workdir


def _findings(capsys, dsn: str) -> dict[str, dict]:
    main(["doctor", "--json", "--dsn", dsn])
    out, err = capsys.readouterr()
    assert out, err
    return {f["id"]: f for f in json.loads(out)["findings"]}


@contextlib.contextmanager
def _server(pg_version: int, **settings: Setting) -> Iterator[Postgres]:
    """A server of its own, for settings that need a restart (slots)."""
    who = _process.run_as()
    server = Postgres(make_workdir(None, who, prefix="pgsteady-test-doctor-"), who=who,
                      pg_version=pg_version, settings=settings)
    try:
        yield server.start()
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


@pytest.mark.pg_versions(13, 14)
def test_killed_clients_advice_follows_client_connection_check_interval(
        pg_version, pgsteady_version_database, capsys):
    """14+: a warning whose fix sets client_connection_check_interval (naming 14+); 13: an
    info saying it needs 14 and what bounds the leak meanwhile."""
    leak = _findings(capsys, pgsteady_version_database.dsn)[
        "setting-client-connection-check-interval"]
    assert "14+" in leak["fix"]
    if pg_version >= 14:
        assert leak["severity"] == "warning"
        assert leak["fix"].startswith("client_connection_check_interval = '10s'")
    else:
        assert leak["severity"] == "info"
        assert "upgrade to PostgreSQL 14+" in leak["fix"]
        assert "lock_timeout" in leak["fix"]


@pytest.mark.pg_versions(13, 14)
def test_saturated_connections_advice_offers_only_what_the_server_has(pg_version, capsys):
    """With its slots nearly all taken, the fix proposes client_connection_check_interval on
    14 and, on 13, timeouts that bound a dead client's wait."""
    with _server(pg_version, max_connections=8, superuser_reserved_connections=3) as server, \
            contextlib.ExitStack() as sessions:
        for _ in range(4):  # 4 of 5 usable slots, doctor's own the fifth
            sessions.enter_context(psycopg.connect(server.dsn(application_name="app")))
        fix = _findings(capsys, server.dsn())["connections-saturated"]["fix"]
    assert ("client_connection_check_interval = '10s' (PostgreSQL 14+)" in fix) == \
        (pg_version >= 14)
    assert ("lock_timeout and statement_timeout" in fix) == (pg_version < 14)


@pytest.mark.pg_versions(15, 16)
def test_reserved_slots_fix_names_reserved_connections_from_16(pg_version, capsys):
    """With no reserved slots, the fix adds reserved_connections (a 16+ setting) on 16 only."""
    with _server(pg_version, superuser_reserved_connections=0) as server:
        fix = _findings(capsys, server.dsn())["no-reserved-slots"]["fix"]
    assert fix.startswith("superuser_reserved_connections = 3")
    assert ("reserved_connections = 3  # PostgreSQL 16+" in fix) == (pg_version >= 16)
