"""The example project's manage.py, run against a database of the session's PostgreSQL (or
through PgBouncer). A module of its own, not conftest: with several conftest.py in tests/,
``import conftest`` finds whichever loaded last."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "examples" / "django"
SRC = Path(__file__).parents[2] / "src"


def _environ(dsn: str, env: dict[str, str]) -> dict[str, str]:
    environ = {**os.environ, "DATABASE_DSN": dsn, "PGSTEADY_RETRY_BUDGET": "1.5",
               "PGSTEADY_LOCK_TIMEOUT": "0.3", **env}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), environ.get("PYTHONPATH")]))
    return environ


def run_manage(dsn: str, *args: str, timeout: float = 120, **env: str) \
        -> subprocess.CompletedProcess[str]:
    """``python manage.py ARGS`` of the example, its database at ``dsn``."""
    return subprocess.run([sys.executable, "manage.py", *args], cwd=EXAMPLE,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env=_environ(dsn, env))


def start_manage(dsn: str, *args: str, **env: str) -> subprocess.Popen[str]:
    """``python manage.py ARGS`` started, not waited for."""
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=EXAMPLE, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_environ(dsn, env))


def settings_env(folder: Path, body: str, name: str = "test_settings") -> dict[str, str]:
    """The env that runs the example with settings ``name``: the example's own, then ``body``
    (``INSTALLED_APPS``, ``DATABASES`` changed for one test); ``folder`` goes on the path."""
    (folder / f"{name}.py").write_text(f"from mysite.settings import *  # noqa\n{body}\n")
    return {"DJANGO_SETTINGS_MODULE": name,
            "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(folder)])}


BACKFILL = '''from django.db import migrations


def fill(apps, schema_editor):
    apps.get_model("shop", "Product").objects.filter(price_cents=0).update(in_stock=False)


class Migration(migrations.Migration):
    dependencies = [("shop", "0002_product_in_stock")]
    operations = [migrations.RunPython(fill, migrations.RunPython.noop)]
'''


def backfill_app(folder: Path) -> dict[str, str]:
    """An app ``backfill`` whose one migration, ``0001_fill``, is a RunPython after shop's
    0002; the env whose settings install it (beside the example's apps)."""
    migrations = folder / "backfill" / "migrations"
    migrations.mkdir(parents=True)
    (folder / "backfill" / "__init__.py").write_text("")
    (migrations / "__init__.py").write_text("")
    (migrations / "0001_fill.py").write_text(BACKFILL)
    return settings_env(folder, 'INSTALLED_APPS = [*INSTALLED_APPS, "backfill"]')


UNNAMED_0001 = '''from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [
        migrations.CreateModel("Item", [("id", models.BigAutoField(primary_key=True)),
                                        ("a", models.IntegerField()),
                                        ("b", models.IntegerField())]),
        migrations.AlterIndexTogether("item", {("a", "b")}),
        migrations.AlterUniqueTogether("item", {("a", "b")}),
    ]
'''
UNNAMED_0002 = '''from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("unnamed", "0001_initial")]
    operations = [
        migrations.RenameIndex("item", new_name="unnamed_item_ab_idx", old_fields=("a", "b")),
        migrations.AlterUniqueTogether("item", set()),
    ]
'''


def unnamed_app(folder: Path) -> dict[str, str]:
    """An app ``unnamed`` whose 0002 renames an unnamed index and drops a unique_together
    (what django-taggit's 0006 and wagtailcore's 0087 do): Django looks both names up in the
    catalog. The env whose settings install it."""
    migrations = folder / "unnamed" / "migrations"
    migrations.mkdir(parents=True)
    (folder / "unnamed" / "__init__.py").write_text("")
    (migrations / "__init__.py").write_text("")
    (migrations / "0001_initial.py").write_text(UNNAMED_0001)
    (migrations / "0002_rename.py").write_text(UNNAMED_0002)
    return settings_env(folder, 'INSTALLED_APPS = [*INSTALLED_APPS, "unnamed"]')
