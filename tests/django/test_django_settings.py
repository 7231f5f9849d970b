"""Every connection of the backend carries pgsteady's session settings, in each pooler mode."""

from __future__ import annotations

import json
import os
import socket

from shop_project import run_manage

SHOW = ("import json; from django.db import connection, transaction\n"
        "def show():\n"
        "    with connection.cursor() as c:\n"
        "        out = []\n"
        "        for name in ('lock_timeout', 'statement_timeout',\n"
        "                     'idle_in_transaction_session_timeout', 'application_name'):\n"
        "            c.execute('SHOW ' + name); out.append(c.fetchone()[0])\n"
        "        return out\n"
        "auto = show()\n"
        "with transaction.atomic():\n"
        "    inside = show()\n"
        "print(json.dumps({'autocommit': auto, 'atomic': inside}))\n")


def _shown(result) -> dict[str, list[str]]:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_direct_connection_carries_timeouts_and_label(db):
    """Direct: SHOW from a Django cursor gives the alias's timeouts and service@host:pid."""
    shown = _shown(run_manage(db, "shell", "-c", SHOW))
    for values in shown.values():
        assert values[:3] == ["300ms", "30s", "1min"]
        service, _, where = values[3].partition("@")
        assert service == "shop" and where.startswith(socket.gethostname()[:20])


def test_session_pooling_sets_once_per_connection(pgsteady_stack, pgsteady_database):
    """Behind PgBouncer in session mode (no startup options), a SET gives the same values."""
    cluster = pgsteady_stack(pool_size=2, pool_mode="session")
    dsn = cluster.pooled_dsn(pgsteady_database.name)
    shown = _shown(run_manage(dsn, "shell", "-c", SHOW, PGSTEADY_POOLER="session"))
    for values in shown.values():
        assert values[:3] == ["300ms", "30s", "1min"]
        assert values[3].startswith("shop@")


def test_transaction_pooling_sends_settings_with_each_transaction(pgsteady_stack,
                                                                   pgsteady_database):
    """Behind PgBouncer in transaction mode: the settings hold inside atomic() and for each
    autocommit query, and nothing leaks to another client of the same server connection."""
    import psycopg

    cluster = pgsteady_stack(pool_size=1, pool_mode="transaction")
    dsn = cluster.pooled_dsn(pgsteady_database.name)
    shown = _shown(run_manage(dsn, "shell", "-c", SHOW, PGSTEADY_POOLER="transaction"))
    for values in shown.values():
        assert values[:3] == ["300ms", "30s", "1min"]
        assert values[3].startswith("shop@")
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as other:
        assert other.execute("SHOW lock_timeout").fetchone() == ("0",)


def test_bad_option_is_one_line(db):
    """A wrong OPTIONS['pgsteady'] value is one ImproperlyConfigured line naming the key."""
    result = run_manage(db, "shell", "-c", "from django.db import connection; connection.cursor()",
                        PGSTEADY_POOLER="bouncy")
    assert result.returncode != 0
    assert "DATABASES['default']['OPTIONS']['pgsteady']: pooler must be one of" in result.stderr
    assert os.environ.get("PGPASSWORD", "\0") not in result.stderr
