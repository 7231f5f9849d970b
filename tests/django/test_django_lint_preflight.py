"""manage.py pgsteady_lint and pgsteady_preflight on the example project."""

from __future__ import annotations

import json

from shop_project import EXAMPLE, SRC, _environ, run_manage


def test_lint_flags_add_field_at_its_operation(db):
    """Unapplied migrations are linted as Django runs them; 0002's AddField is flagged for
    the dropped default, at its line in the migration file, with the Django fix."""
    assert run_manage(db, "migrate", "shop", "0001", "--no-input").returncode == 0
    result = run_manage(db, "pgsteady_lint", "shop", "--format", "json")
    assert result.returncode == 1, result.stderr
    findings = json.loads(result.stdout)["findings"]
    by_rule = {f["rule"]: f for f in findings}
    dropped = by_rule["dropping-new-column-default"]
    assert dropped["path"] == "shop/migrations/0002_product_in_stock.py"
    assert dropped["line"] == 8  # the migrations.AddField( line
    assert "shop.0002_product_in_stock operation 1: Add field in_stock to product" in \
        dropped["message"]
    assert "db_default" in dropped["help"]
    # the ENGINE is pgsteady's: migrate sets lock_timeout, so no finding asks for one
    assert "require-lock-timeout" not in by_rule
    # 0003 is atomic = False with AddIndexConcurrently: nothing to say about the index
    assert not [f for f in findings if f["path"].endswith("0003_product_name_idx.py")]


def test_lint_pending_migrations_are_one_change(db):
    """0001 and 0002 pending together: the table is new to 0002, nothing running writes it."""
    result = run_manage(db, "pgsteady_lint", "shop")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(3 migration(s))" in result.stderr


def test_lint_skips_applied_migrations_unless_all(db):
    """Once 0002 is applied, only 0003 is linted (clean); --all lints every one again."""
    assert run_manage(db, "migrate", "shop", "0002", "--no-input").returncode == 0
    result = run_manage(db, "pgsteady_lint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(1 migration(s))" in result.stderr
    again = run_manage(db, "pgsteady_lint", "--all")
    assert again.returncode == 1
    assert "shop/migrations/0002_product_in_stock.py:8:9 dropping-new-column-default" in \
        again.stdout


def test_lint_unknown_app_is_one_line(db):
    """An app label that is not installed: exit 2, one line naming the installed ones."""
    result = run_manage(db, "pgsteady_lint", "nosuchapp")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "CommandError: no installed app labelled nosuchapp; installed: contenttypes, "
        "pgsteady, shop"]


def test_preflight_names_the_blocker_then_clears(db, pgsteady_lock_holder):
    """A session holding shop_product is named (pid, label) as the blocker of 0002's AddField;
    preflight exits 1, then 0 once it has gone."""
    assert run_manage(db, "migrate", "contenttypes", "--no-input").returncode == 0
    assert run_manage(db, "migrate", "shop", "0001", "--no-input").returncode == 0
    holder = pgsteady_lock_holder(db, "shop_product", "ROW EXCLUSIVE",
                                  application_name="checkout-worker")
    result = run_manage(db, "pgsteady_preflight")
    assert result.returncode == 1, result.stderr
    assert f"blocker: pid {holder.pid} 'checkout-worker'" in result.stdout
    assert "shop/migrations/0002_product_in_stock.py:8 (shop.0002_product_in_stock " \
           "operation 1: Add field in_stock to product)" in result.stdout
    holder.release()
    result = run_manage(db, "pgsteady_preflight")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: 2 pending migration(s), nobody in their way" in result.stdout



def test_pgsteady_lint_runner_django_from_the_project_folder(db):
    """pgsteady lint --tool django --django-settings lints every migration of the project
    (each its own change): the add-field pattern in 0002 is found at its operation."""
    import os
    import subprocess
    import sys


    result = subprocess.run(
        [sys.executable, "-m", "pgsteady", "lint", "--tool", "django", "--django-settings",
         "mysite.settings", "--no-cache"], cwd=EXAMPLE, capture_output=True, text=True,
        timeout=120, check=False, env=_environ(db, {}))
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith(
        "shop/migrations/0002_product_in_stock.py:8:9 dropping-new-column-default")
    assert "runner profile django (3 migration(s) of mysite.settings)" in result.stderr
    narrowed = subprocess.run(
        [sys.executable, "-m", "pgsteady", "lint", "--tool", "django", "--no-cache",
         "shop/migrations/0003_product_name_idx.py"], cwd=EXAMPLE, capture_output=True,
        text=True, timeout=120, check=False,
        env={**_environ(db, {}), "DJANGO_SETTINGS_MODULE": "mysite.settings"})
    assert narrowed.returncode == 0, narrowed.stdout + narrowed.stderr
    assert os.environ.get("PGPASSWORD", "\0") not in result.stderr


def test_pgsteady_lint_runner_django_without_settings_is_one_line(tmp_path):
    """--tool django with no settings anywhere: exit 2, one line saying what to pass."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(SRC)
    result = subprocess.run([sys.executable, "-m", "pgsteady", "lint", "--tool", "django"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            check=False, env=env)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "--tool django needs the project's settings: --django-settings" in result.stderr


def test_preflight_without_a_server_says_it_needs_the_real_one(db):
    """preflight cannot reach the database: one line that says it reads the live sessions of
    that database (not lint's "an empty database will do", which would send a user to the
    wrong server)."""
    result = run_manage(db.replace("dbname=", "dbname=nosuchdb_"), "pgsteady_preflight")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("CommandError: cannot connect"), lines
    assert "empty database will do" not in lines[0]
    assert "sessions" in lines[0]


def test_preflight_accept_unknown_lets_the_job_through_blockers_still_count(
        db, tmp_path, pgsteady_lock_holder):
    """A pending RunPython is unknown (exit 1) until named with --accept-unknown: then the
    Job's `pgsteady_preflight --accept-unknown ... && migrate` migrates; a blocker still
    fails it, and a name that is no migration is one line, exit 2."""
    import subprocess
    import sys

    from shop_project import backfill_app

    env = backfill_app(tmp_path)
    assert run_manage(db, "migrate", "shop", "0001", "--no-input", **env).returncode == 0
    result = run_manage(db, "pgsteady_preflight", **env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "unknown:" in result.stdout and "RunPython" in result.stdout
    accept = ("--accept-unknown", "backfill.0001_fill")
    holder = pgsteady_lock_holder(db, "shop_product", "ROW EXCLUSIVE",
                                  application_name="checkout-worker")
    blocked = run_manage(db, "pgsteady_preflight", *accept, **env)
    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    assert f"blocker: pid {holder.pid} 'checkout-worker'" in blocked.stdout
    holder.release()
    wrong = run_manage(db, "pgsteady_preflight", "--accept-unknown", "backfill.0002_nope",
                       **env)
    assert wrong.returncode == 2
    assert wrong.stderr.strip().splitlines() == [
        "CommandError: --accept-unknown backfill.0002_nope: no such migration "
        "(app_label.name); pending with unknown locks: backfill.0001_fill"]
    job = subprocess.run(
        ["sh", "-c", f"{sys.executable} manage.py pgsteady_preflight --accept-unknown "
                     f"backfill.0001_fill && {sys.executable} manage.py migrate --no-input"],
        cwd=EXAMPLE,
        capture_output=True, text=True, timeout=120, check=False, env=_environ(db, env))
    assert job.returncode == 0, job.stdout + job.stderr
    assert "accepted:" in job.stdout and "RunPython" in job.stdout
    assert "1 unknown(s) accepted as reviewed" in job.stdout
    assert "Applying backfill.0001_fill... OK" in job.stdout


def test_lint_without_a_server_is_exit_3_one_line(db):
    """manage.py pgsteady_lint with the database unreachable: exit 3 (cannot connect), one
    line, no traceback (it read the applied migrations before asking for the server)."""
    result = run_manage("host=127.0.0.1 port=1 dbname=x user=u connect_timeout=5",
                        "pgsteady_lint")
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("CommandError: cannot connect"), lines


def test_bad_pgsteady_option_is_one_line_in_the_commands_and_e004(db):
    """A wrong OPTIONS['pgsteady'] value: pgsteady_lint and pgsteady_preflight say it in one
    line (exit 2), check reports pgsteady.E004; no traceback."""
    for command in ("pgsteady_lint", "pgsteady_preflight"):
        result = run_manage(db, command, PGSTEADY_POOLER="bouncy")
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip().splitlines() == [
            "CommandError: DATABASES['default']['OPTIONS']['pgsteady']: pooler must be one of "
            "direct, session, transaction; got 'bouncy'"]
    for args in (("check",), ("migrate", "--no-input")):
        result = run_manage(db, *args, PGSTEADY_POOLER="bouncy")
        assert result.returncode == 1
        assert "(pgsteady.E004) DATABASES['default']['OPTIONS']['pgsteady']: pooler" in \
            result.stderr
        assert "Traceback" not in result.stderr


def test_pgsteady_lint_tool_django_on_a_path_without_migrations_is_exit_2(db):
    """`pgsteady lint --tool django` on a path holding no migration (a models file, a folder
    that does not exist) is a usage error, exit 2, one line: not "0 files", exit 0."""
    import subprocess
    import sys

    for path in ("shop/models.py", "nowhere/"):
        result = subprocess.run(
            [sys.executable, "-m", "pgsteady", "lint", "--tool", "django", "--django-settings",
             "mysite.settings", "--no-cache", path], cwd=EXAMPLE, capture_output=True,
            text=True, timeout=120, check=False, env=_environ(db, {}))
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.strip().splitlines() == [
            f"pgsteady: error: {path}: no migration of the project's apps there (name a "
            f"migration file or a folder holding some)"]


RENDER_0002 = ("from django.db import connection\n"
               "from django.db.migrations.loader import MigrationLoader\n"
               "from pgsteady.django.collect import render\n"
               "loader = MigrationLoader(None)\n"
               "done = render(connection, loader, {('unnamed', '0002_rename')})\n"
               "print('ERROR', done[-1].error)\n"
               "print(done[-1].sql)\n")


def test_lint_on_an_empty_database_renders_catalog_lookups(db, tmp_path):
    """Renaming an unnamed index and dropping a unique_together need names Django looks up
    in the catalog: on an empty database lint wrote no SQL for them (exit 2); now it renders
    them with the names Django gives them, the very names a migrated database holds."""
    import re
    import subprocess
    import sys

    import psycopg
    from shop_project import unnamed_app

    env = unnamed_app(tmp_path)
    lint = subprocess.run(
        [sys.executable, "-m", "pgsteady", "lint", "--tool", "django", "--no-cache",
         str(tmp_path / "unnamed")], cwd=EXAMPLE, capture_output=True, text=True,
        timeout=120, check=False, env=_environ(db, env))
    assert lint.returncode in (0, 1), lint.stdout + lint.stderr
    assert "cannot write its SQL" not in lint.stdout + lint.stderr
    rendered = run_manage(db, "shell", "-c", RENDER_0002, **env)
    assert rendered.returncode == 0, rendered.stderr
    assert "ERROR \n" in rendered.stdout
    renamed = re.search(r'ALTER INDEX "(\w+)" RENAME TO "unnamed_item_ab_idx"', rendered.stdout)
    dropped = re.search(r'ALTER TABLE "unnamed_item" DROP CONSTRAINT "(\w+)"', rendered.stdout)
    assert renamed and dropped, rendered.stdout
    assert run_manage(db, "migrate", "unnamed", "0001", "--no-input", **env).returncode == 0
    with psycopg.connect(db) as conn:
        names = {row[0] for row in conn.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = 'unnamed_item'::regclass "
            "UNION SELECT indexrelid::regclass::text FROM pg_index "
            "WHERE indrelid = 'unnamed_item'::regclass")}
    assert {renamed.group(1), dropped.group(1)} <= names
