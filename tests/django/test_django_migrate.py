"""manage.py migrate through the backend: each migration all or nothing, with lock retries."""

from __future__ import annotations

import time

import psycopg
from shop_project import run_manage, start_manage

from pgsteady.migrate.testing import LockHolder

BUDGET = 1.5  # PGSTEADY_RETRY_BUDGET in conftest.run_manage


def columns(dsn: str, table: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attnum > 0 AND NOT attisdropped ORDER BY attnum", [table]).fetchall()
    return [r[0] for r in rows]


def applied(dsn: str, app: str = "shop") -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute(
            "SELECT name FROM django_migrations WHERE app = %s ORDER BY id", [app]).fetchall()]


def indexes(dsn: str, table: str) -> dict[str, bool]:
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c "
            "ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass(%s)", [table]).fetchall())


def test_migrate_applies_every_migration(db, manage):
    """A plain run applies the three migrations, the concurrent index included."""
    result = manage("migrate", "--no-input")
    assert result.returncode == 0, result.stderr
    assert applied(db) == ["0001_initial", "0002_product_in_stock", "0003_product_name_idx"]
    assert columns(db, "shop_product") == ["id", "name", "price_cents", "in_stock"]
    assert indexes(db, "shop_product")["shop_product_name_idx"] is True


def test_blocked_migration_gives_up_in_budget_names_pid_then_applies(db, manage,
                                                                      pgsteady_lock_holder):
    """A reader holding shop_product: migrate exits 1 within the budget naming its pid, with
    nothing of 0002 applied and django_migrations unchanged; once it ends, migrate applies."""
    assert manage("migrate", "shop", "0001", "--no-input").returncode == 0
    before = applied(db)
    holder: LockHolder = pgsteady_lock_holder(db, "shop_product", select=True,
                                              application_name="nightly-report")
    start = time.monotonic()
    result = manage("migrate", "--no-input")
    took = time.monotonic() - start
    assert result.returncode == 1, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("CommandError: shop.0002_product_in_stock: could not get its locks")
    assert f"pid {holder.pid} 'nightly-report'" in error
    assert "nothing of it was applied" in error
    assert "Traceback" not in result.stderr
    assert took < BUDGET + 8  # the budget, plus Django's start-up on a busy host
    assert applied(db) == before
    assert columns(db, "shop_product") == ["id", "name", "price_cents"]
    holder.release()
    result = manage("migrate", "--no-input")
    assert result.returncode == 0, result.stderr
    assert applied(db)[-2:] == ["0002_product_in_stock", "0003_product_name_idx"]


def test_retry_gets_the_lock_when_the_blocker_ends_in_budget(db, pgsteady_lock_holder):
    """A blocker that ends once migrate has been seen waiting: the migration applies on a
    later try, and the failed tries were logged naming the blocker."""
    assert run_manage(db, "migrate", "shop", "0001", "--no-input").returncode == 0
    holder = pgsteady_lock_holder(db, "shop_product", select=True)
    process = start_manage(db, "migrate", "--no-input", PGSTEADY_RETRY_BUDGET="60")
    seen: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:  # until a try has failed on the lock, naming the holder
            seen.append(line)
            if "could not get its locks" in line:
                break
        holder.release()
        _, rest = process.communicate(timeout=120)
    finally:
        process.kill()
    stderr = "".join(seen) + rest
    assert process.returncode == 0, stderr
    assert f"blocked by: pid {holder.pid}" in stderr
    assert "0002_product_in_stock" in applied(db)


def test_failed_concurrent_index_leaves_invalid_index_which_next_run_drops(db, manage):
    """A CREATE INDEX CONCURRENTLY that fails leaves an INVALID index; the next run drops it
    and builds it again (as pgsteady migrate does for no-transaction files)."""
    assert manage("migrate", "shop", "0002", "--no-input").returncode == 0
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("INSERT INTO shop_product (name, price_cents, in_stock) "
                     "VALUES ('a', 1, true)")
        # an index of that name left INVALID, as by a concurrent build that failed part way
        conn.execute("CREATE INDEX shop_product_name_idx ON shop_product (name)")
        conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = "
                     "'shop_product_name_idx'::regclass")
    assert indexes(db, "shop_product")["shop_product_name_idx"] is False
    result = manage("migrate", "--no-input")
    assert result.returncode == 0, result.stderr
    assert "dropping invalid index public.shop_product_name_idx" in result.stderr
    assert indexes(db, "shop_product")["shop_product_name_idx"] is True


def test_failing_atomic_migration_leaves_nothing(db, manage):
    """A statement failing in an atomic migration: exit 1, one line, nothing applied."""
    assert manage("migrate", "shop", "0001", "--no-input").returncode == 0
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("ALTER TABLE shop_product ADD COLUMN in_stock int")  # in the way
    result = manage("migrate", "--no-input")
    assert result.returncode == 1
    assert "CommandError: shop.0002_product_in_stock failed: 42701" in result.stderr
    assert "nothing of it was applied" in result.stderr
    assert "Traceback" not in result.stderr
    assert applied(db) == ["0001_initial"]


def test_migrate_refuses_a_transaction_pooler(pgsteady_stack, pgsteady_database):
    """Through PgBouncer in transaction mode migrate refuses, one line, exit 2, nothing run."""
    cluster = pgsteady_stack(pool_size=2, pool_mode="transaction")
    dsn = cluster.pooled_dsn(pgsteady_database.name)
    result = run_manage(dsn, "migrate", "--no-input", PGSTEADY_POOLER="transaction")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(
        "CommandError: DATABASES['default'] goes through a transaction pooler")
    assert "Traceback" not in result.stderr
    with psycopg.connect(pgsteady_database.dsn) as conn:
        assert conn.execute("SELECT to_regclass('shop_product')").fetchone() == (None,)


def test_blocked_non_atomic_migration_gives_up_naming_the_pid(db, manage, pgsteady_lock_holder):
    """0003 (atomic = False, AddIndexConcurrently) behind a writer's open transaction: its
    statement retries, then exit 1 naming the pid; no index is left, 0003 not recorded."""
    assert manage("migrate", "shop", "0002", "--no-input").returncode == 0
    holder = pgsteady_lock_holder(db, "shop_product", "SHARE ROW EXCLUSIVE",
                                  application_name="bulk-import")
    result = manage("migrate", "--no-input")
    assert result.returncode == 1, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("CommandError: shop.0003_product_name_idx (statement 1): could not "
                            "get its locks")
    assert f"pid {holder.pid} 'bulk-import'" in error
    assert "0003_product_name_idx" not in applied(db)
    assert "shop_product_name_idx" not in indexes(db, "shop_product")


def _migrate_until_blocked(dsn: str):
    """migrate started (budget 60 s) and read until a try failed on the lock; its stderr."""
    process = start_manage(dsn, "migrate", "--no-input", PGSTEADY_RETRY_BUDGET="60")
    seen: list[str] = []
    assert process.stderr is not None
    for line in process.stderr:
        seen.append(line)
        if "could not get its locks" in line:
            break
    return process, seen


def test_session_ended_mid_migration_is_exit_3_and_says_it_did_not_apply(
        db, manage, pgsteady_lock_holder):
    """The server ends migrate's session (pg_terminate_backend, as a shutdown does) while
    0002 waits for its lock: exit 3, "the server ended the session", and that 0002 did not
    apply, read from django_migrations; not "Fix the migration"."""
    assert manage("migrate", "shop", "0001", "--no-input").returncode == 0
    holder = pgsteady_lock_holder(db, "shop_product", select=True)
    process, seen = _migrate_until_blocked(db)
    try:
        with psycopg.connect(db, autocommit=True) as conn:
            ended = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                "application_name LIKE 'shop@%%' AND datname = current_database()").fetchone()
        assert ended == (1,)
        _, rest = process.communicate(timeout=120)
    finally:
        process.kill()
        holder.release()
    stderr = "".join(seen) + rest
    assert process.returncode == 3, stderr
    error = stderr.strip().splitlines()[-1]
    assert error.startswith("CommandError: the server ended the session while "
                            "shop.0002_product_in_stock ran (57P01"), error
    assert "shop.0002_product_in_stock did not apply (django_migrations does not have it)" \
        in error
    assert "Fix the migration" not in stderr and "Traceback" not in stderr
    assert applied(db) == ["0001_initial"]
    assert "(1 try)" in stderr and "(1 tries)" not in stderr  # contenttypes, applied first


def test_server_gone_mid_migration_is_exit_3_and_unknown(pgsteady_postgres, pgsteady_database,
                                                         pgsteady_proxy, pgsteady_lock_holder):
    """The connection to the server is lost (the proxy in front of it stops) while 0002 waits
    for its lock, and no new session can be opened: exit 3, whether it applied is unknown."""
    db = pgsteady_database.dsn
    proxied = pgsteady_postgres.dsn(pgsteady_database.name, port=pgsteady_proxy.port)
    assert run_manage(proxied, "migrate", "shop", "0001", "--no-input").returncode == 0
    holder = pgsteady_lock_holder(db, "shop_product", select=True)
    process, seen = _migrate_until_blocked(proxied)
    try:
        pgsteady_proxy.stop()
        _, rest = process.communicate(timeout=120)
    finally:
        process.kill()
        holder.release()
    stderr = "".join(seen) + rest
    assert process.returncode == 3, stderr
    error = stderr.strip().splitlines()[-1]
    assert error.startswith("CommandError: the server went away while "
                            "shop.0002_product_in_stock ran"), error
    assert "whether it applied is unknown" in error
    assert "Fix the migration" not in stderr and "Traceback" not in stderr


def test_session_ended_in_a_non_atomic_migration_says_part_may_have_run(
        db, manage, pgsteady_lock_holder):
    """0003 (atomic = False, a concurrent index build) loses its session while it waits: exit
    3, and the outcome says it is not recorded but ran outside a transaction."""
    assert manage("migrate", "shop", "0002", "--no-input").returncode == 0
    holder = pgsteady_lock_holder(db, "shop_product", "SHARE ROW EXCLUSIVE")
    process, seen = _migrate_until_blocked(db)
    try:
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                         "application_name LIKE 'shop@%%' AND datname = current_database()")
        _, rest = process.communicate(timeout=120)
    finally:
        process.kill()
        holder.release()
    stderr = "".join(seen) + rest
    assert process.returncode == 3, stderr
    error = stderr.strip().splitlines()[-1]
    assert error.startswith("CommandError: the server ended the session while "
                            "shop.0003_product_name_idx ran"), error
    assert "is not recorded in django_migrations, but it runs outside a transaction " \
           "(atomic = False)" in error
    assert "Fix the migration" not in stderr
