"""pgsteady against Django's two migration-safety peers, on the same migrations.

Writes a throwaway Django project (one app, ``bench``, with a varied set of migrations: add a
field with a default, add an index, add it concurrently, rename, drop a column, add a foreign
key, RunSQL, change a type, set NOT NULL, add a unique constraint and a check constraint,
rename a model) and asks, for each migration:

- pgsteady (``ENGINE pgsteady.django``): the rules ``pgsteady_lint --all`` reports;
- django-migration-linter: the issues its SQL analyser reports (codes);
- django-pg-zero-downtime-migrations (``RAISE_FOR_UNSAFE``): whether its backend refuses the
  migration, rewrites it into safe SQL (CONCURRENTLY, NOT VALID, ...), or passes it as is.

All three write the SQL with a database, as sqlmigrate does (nothing is written)::

    python bench/django_peers.py --dsn "host=... dbname=scratch"
    python bench/django_peers.py --dsn ... --fill 2000000   # + table sizes (writes bench_*)

``--fill N`` applies 0001 in that database, puts N rows in bench_book and lints again with
``--dsn``: size-aware findings on the big table become errors, with its row count.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap
from pathlib import Path

CHECK = "condition" if __import__("django").VERSION >= (5, 1) else "check"
MIGRATIONS: list[tuple[str, str, str]] = [  # (name, what it does, operations source)
    ("0001_initial", "create tables", """
        migrations.CreateModel("Author", [("id", models.BigAutoField(primary_key=True)),
                                          ("name", models.CharField(max_length=100))]),
        migrations.CreateModel("Book", [("id", models.BigAutoField(primary_key=True)),
                                        ("title", models.CharField(max_length=200)),
                                        ("pages", models.IntegerField(null=True)),
                                        ("author_name",
                                         models.CharField(max_length=100, null=True))]),
    """),
    ("0002_add_field_default", "AddField NOT NULL default", """
        migrations.AddField("book", "in_stock", models.BooleanField(default=True)),
    """),
    ("0003_add_nullable", "AddField nullable", """
        migrations.AddField("book", "note", models.TextField(null=True)),
    """),
    ("0004_add_index", "AddIndex", """
        migrations.AddIndex("book", models.Index(fields=["title"], name="bench_book_title_idx")),
    """),
    ("0005_add_index_concurrently", "AddIndexConcurrently, atomic=False", """
        AddIndexConcurrently("book", models.Index(fields=["pages"], name="bench_book_pages_idx")),
    """),
    ("0006_rename_field", "RenameField", """
        migrations.RenameField("book", "author_name", "writer_name"),
    """),
    ("0007_remove_field", "RemoveField", """
        migrations.RemoveField("book", "note"),
    """),
    ("0008_add_fk", "AddField ForeignKey", """
        migrations.AddField("book", "author", models.ForeignKey("bench.Author", null=True,
                                                                on_delete=models.CASCADE)),
    """),
    ("0009_runsql_index", "RunSQL CREATE INDEX", """
        migrations.RunSQL("CREATE INDEX bench_book_lower_title ON bench_book (lower(title))",
                          "DROP INDEX bench_book_lower_title"),
    """),
    ("0010_alter_type", "AlterField int -> bigint", """
        migrations.AlterField("book", "pages", models.BigIntegerField(null=True)),
    """),
    ("0011_set_not_null", "AlterField null=False", """
        migrations.AlterField("book", "writer_name", models.CharField(max_length=100)),
    """),
    ("0012_add_unique", "AlterField unique=True", """
        migrations.AlterField("book", "title", models.CharField(max_length=200, unique=True)),
    """),
    ("0013_add_check", "AddConstraint CheckConstraint", f"""
        migrations.AddConstraint("book", models.CheckConstraint({CHECK}=models.Q(pages__gte=0),
                                                                name="bench_pages_gte_0")),
    """),
    ("0014_rename_model", "RenameModel", """
        migrations.RenameModel("Author", "Writer"),
    """),
]
NON_ATOMIC = {"0005_add_index_concurrently"}

SETTINGS = """
from psycopg.conninfo import conninfo_to_dict
_dsn = conninfo_to_dict({dsn!r})
_db = {{"NAME": _dsn.get("dbname"), "USER": _dsn.get("user", ""),
       "PASSWORD": _dsn.get("password", ""), "HOST": _dsn.get("host", ""),
       "PORT": _dsn.get("port", ""),
       "OPTIONS": {{"passfile": _dsn["passfile"]}} if "passfile" in _dsn else {{}}}}
SECRET_KEY = "bench"
USE_TZ = True
INSTALLED_APPS = ["pgsteady.django", "django_migration_linter", "bench"]
DATABASES = {{
    "default": {{**_db, "ENGINE": "pgsteady.django"}},
    "zdm": {{**_db, "ENGINE": "django_zero_downtime_migrations.backends.postgres"}},
}}
ZERO_DOWNTIME_MIGRATIONS_RAISE_FOR_UNSAFE = True
MIGRATION_LINTER_OPTIONS = {{"no_cache": True}}
"""


def write_project(root: Path, dsn: str) -> None:
    (root / "benchsite").mkdir()
    (root / "benchsite" / "__init__.py").write_text("")
    (root / "benchsite" / "settings.py").write_text(SETTINGS.format(dsn=dsn))
    app = root / "bench"
    (app / "migrations").mkdir(parents=True)
    (app / "__init__.py").write_text("")
    (app / "migrations" / "__init__.py").write_text("")
    previous = None
    for name, _, operations in MIGRATIONS:
        body = textwrap.dedent(operations).strip("\n")
        (app / "migrations" / f"{name}.py").write_text(
            "from django.contrib.postgres.operations import AddIndexConcurrently  # noqa\n"
            "from django.db import migrations, models\n\n\n"
            "class Migration(migrations.Migration):\n"
            f"    atomic = {name not in NON_ATOMIC}\n"
            f"    dependencies = {[('bench', previous)] if previous else []!r}\n"
            "    operations = [\n" + textwrap.indent(body, "    ") + "\n    ]\n")
        previous = name


def pgsteady_rules(dsn: str | None) -> dict[str, list[str]]:
    from django.db import connections

    from pgsteady.django.lint import lint

    report, _ = lint(connections["default"], app_labels=["bench"], include_applied=True,
                     dsn=dsn)
    found: dict[str, list[str]] = {}
    for finding in report.findings:
        name = Path(finding.path).stem
        mark = "" if finding.severity == "error" else " (warning)"
        if finding.rows is not None:
            mark += f" [{finding.rows:,} rows]"
        found.setdefault(name, []).append(finding.rule + mark)
    return found


def linter_codes(name: str) -> list[str]:
    from django.db.migrations.loader import MigrationLoader
    from django_migration_linter import MigrationLinter
    from django_migration_linter.sql_analyser.analyser import analyse_sql_statements

    linter = MigrationLinter(no_output=True, no_cache=True, analyser_string="postgresql")
    errors, _, warnings = analyse_sql_statements(
        linter.sql_analyser_class, linter.get_sql("bench", name), [])
    migration = MigrationLoader(None).graph.nodes[("bench", name)]
    more_errors, _, more_warnings = linter.analyse_data_migration(migration)
    codes = [i.code for i in [*errors, *(more_errors or [])]]
    codes += [f"{i.code} (warning)" for i in [*warnings, *(more_warnings or [])]]
    return sorted(set(codes))


def zero_downtime(name: str) -> str:
    from django.core.management import call_command
    from django_zero_downtime_migrations.backends.postgres.schema import (
        UnsafeOperationException,
    )

    plain = _sql("default", name, call_command)
    try:
        safe = _sql("zdm", name, call_command)
    except UnsafeOperationException as exc:
        return "refuses: " + str(exc).splitlines()[0].removesuffix(" is unsafe operation")
    body = [line for line in safe.splitlines() if not line.upper().startswith("SET ")]
    if any(word in " ".join(body).upper() and word not in plain.upper()
           for word in ("CONCURRENTLY", "NOT VALID", "VALIDATE CONSTRAINT")):
        return "rewrites to safe SQL"
    return "passes"


def _sql(alias: str, name: str, call_command: object) -> str:
    import io

    out = io.StringIO()
    call_command("sqlmigrate", "bench", name, database=alias, stdout=out)  # type: ignore[operator]
    return out.getvalue()


def fill(rows: int) -> None:
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", "bench", "0001", verbosity=0)
    with connections["default"].cursor() as cursor:
        cursor.execute("INSERT INTO bench_book (title, pages) SELECT 'b' || g, g "
                       "FROM generate_series(1, %s) g", [rows])
        cursor.execute("ANALYZE bench_book")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="a scratch database (nothing is written "
                                                     "unless --fill)")
    parser.add_argument("--fill", type=int, metavar="ROWS",
                        help="apply 0001 and put ROWS rows in bench_book, then lint with sizes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pgsteady-django-peers-") as folder:
        root = Path(folder)
        write_project(root, args.dsn)
        sys.path.insert(0, str(root))
        os.chdir(root)
        os.environ["DJANGO_SETTINGS_MODULE"] = "benchsite.settings"
        import django

        django.setup()
        if args.fill:
            fill(args.fill)
        ours = pgsteady_rules(args.dsn if args.fill else None)
        rows = [("migration", "pgsteady", "django-migration-linter",
                 "django-pg-zero-downtime-migrations")]
        for name, what, _ in MIGRATIONS[1:]:
            rows.append((f"{name[:4]} {what}", ", ".join(ours.get(name, [])) or "-",
                         ", ".join(linter_codes(name)) or "-", zero_downtime(name)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for number, row in enumerate(rows):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if number == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return 0


if __name__ == "__main__":
    sys.exit(main())
