"""Behind PgBouncer: server-side cursors off under transaction pooling, and the system checks
that say what is wrong with an alias's settings (pgsteady.E001-E003)."""

from __future__ import annotations

from shop_project import run_manage, settings_env

ITERATE = (
    "import threading\n"
    "from django.db import connection\n"
    "from shop.models import Product\n"
    "Product.objects.bulk_create([Product(name=f'p{i}', price_cents=i, in_stock=True)\n"
    "                             for i in range(200)])\n"
    "connection.close()\n"
    "errors, counts = [], []\n"
    "def work():\n"
    "    try:\n"
    "        for _ in range(3):\n"
    "            counts.append(sum(1 for _ in Product.objects.iterator(chunk_size=20)))\n"
    "    except Exception as exc:\n"
    "        errors.append(type(exc).__name__ + ': ' + str(exc).splitlines()[0])\n"
    "    finally:\n"
    "        connection.close()\n"
    "threads = [threading.Thread(target=work) for _ in range(8)]\n"
    "[t.start() for t in threads]; [t.join(60) for t in threads]\n"
    "print('RESULT', len(errors), sorted(set(counts)), errors[:1])\n")

NO_APP = 'INSTALLED_APPS = [a for a in INSTALLED_APPS if a != "pgsteady.django"]'
CURSORS = 'DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = False'


def _result(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("RESULT"))


def test_iterator_through_transaction_pooler_in_threads(pgsteady_stack, pgsteady_database):
    """QuerySet.iterator() in 8 threads through PgBouncer in transaction mode: every thread
    reads all 200 rows (server-side cursors are off under pooler='transaction')."""
    assert run_manage(pgsteady_database.dsn, "migrate", "--no-input").returncode == 0
    cluster = pgsteady_stack(pool_size=3, pool_mode="transaction")
    dsn = cluster.pooled_dsn(pgsteady_database.name)
    result = run_manage(dsn, "shell", "-c", ITERATE, PGSTEADY_POOLER="transaction")
    assert result.returncode == 0, result.stderr
    assert _result(result.stdout) == "RESULT 0 [200] []"


def test_server_side_cursors_under_transaction_pooler_is_e002(db, tmp_path):
    """DISABLE_SERVER_SIDE_CURSORS = False with pooler='transaction': check and
    check --deploy fail with pgsteady.E002, no database needed."""
    env = settings_env(tmp_path, CURSORS)
    for args in (("check",), ("check", "--deploy")):
        result = run_manage(db, *args, PGSTEADY_POOLER="transaction", **env)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "(pgsteady.E002)" in result.stderr
        assert "QuerySet.iterator()" in result.stderr
    direct = run_manage(db, "check", **env)  # a direct connection keeps its cursors
    assert direct.returncode == 0, direct.stderr


def test_engine_without_the_app_is_e001_and_stops_djangos_migrate(db, tmp_path):
    """The ENGINE without the app: check --database and check --deploy fail with
    pgsteady.E001 (once), and Django's own migrate (no retries) stops before applying
    anything."""
    import psycopg

    env = settings_env(tmp_path, NO_APP)
    for args in (("check", "--database", "default"), ("check", "--deploy")):
        result = run_manage(db, *args, **env)
        assert result.returncode == 1, result.stderr
        assert result.stderr.count("(pgsteady.E001)") == 1, result.stderr
    assert "'pgsteady.django' to INSTALLED_APPS" in result.stderr
    migrate = run_manage(db, "migrate", "--no-input", **env)
    assert migrate.returncode == 1
    assert "(pgsteady.E001)" in migrate.stderr
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT to_regclass('django_migrations')").fetchone() == (None,)
    assert run_manage(db, "check", "--database", "default").returncode == 0


def test_direct_pooler_against_pgbouncer_is_e003_and_the_error_says_so(pgsteady_stack,
                                                                        pgsteady_database):
    """pooler='direct' through PgBouncer: check --database names pgsteady.E003 and the
    pooler to set; a query's error carries the same hint, one line."""
    cluster = pgsteady_stack(pool_size=2, pool_mode="transaction")
    dsn = cluster.pooled_dsn(pgsteady_database.name)
    result = run_manage(dsn, "check", "--database", "default")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "(pgsteady.E003)" in result.stderr
    assert "'transaction' or 'session'" in result.stderr
    query = run_manage(dsn, "shell", "-c",
                       "from django.db import connection\n"
                       "try:\n    connection.cursor()\n"
                       "except Exception as exc:\n    print('ERROR', exc)")
    error = next(line for line in query.stdout.splitlines() if line.startswith("ERROR"))
    assert "unsupported startup parameter" in error
    assert "OPTIONS['pgsteady']['pooler'] to 'transaction' or 'session'" in error
    fixed = run_manage(dsn, "check", "--database", "default", PGSTEADY_POOLER="transaction")
    assert fixed.returncode == 0, fixed.stderr


PROBE = ("import json\n"
         "from django.test import Client\n"
         "client = Client()\n"
         "out = {}\n"
         "for which in ('live', 'ready', 'deep'):\n"
         "    response = client.get('/health/' + which)\n"
         "    out[which] = [response.status_code, response['Content-Type'],\n"
         "                  json.loads(response.content)]\n"
         "print('RESULT', json.dumps(out))\n")


def _probes(stdout: str) -> dict:
    import json

    return json.loads(_result(stdout).removeprefix("RESULT "))


def test_health_views_probe_the_alias(db):
    """The example's /health/ready and /health/deep (pgsteady.django.health) answer 200 pass
    with health+json, deep naming a primary, and need no table or migration."""
    result = run_manage(db, "shell", "-c", PROBE)
    assert result.returncode == 0, result.stderr
    probes = _probes(result.stdout)
    for which in ("live", "ready", "deep"):
        status, content_type, report = probes[which]
        assert (status, content_type, report["status"]) == \
            (200, "application/health+json", "pass"), probes[which]
    assert probes["deep"][2]["checks"]["db"][0]["output"].endswith(", primary")


def test_health_views_fail_ready_when_the_database_is_down():
    """With the database unreachable, live still answers 200 (no I/O) while ready and deep
    answer 503 fail, within a few seconds."""
    import time

    start = time.monotonic()
    result = run_manage("host=127.0.0.1 port=1 dbname=x user=u", "shell", "-c", PROBE)
    assert result.returncode == 0, result.stderr
    probes = _probes(result.stdout)
    assert probes["live"][0] == 200
    assert probes["ready"][0] == 503 and probes["ready"][2]["status"] == "fail"
    assert probes["deep"][0] == 503
    assert time.monotonic() - start < 30
