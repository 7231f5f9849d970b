"""``manage.py pgsteady_lint [app_label ...] [--all]``: lint the SQL of pending migrations.

Exit codes as ``pgsteady lint``: 0 clean (warnings allowed), 1 findings, 2 usage error or a
migration whose SQL cannot be written, 3 cannot connect.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS

from pgsteady.django import _pgsteady as core
from pgsteady.django.project import connection as alias_connection


class Command(BaseCommand):  # type: ignore[misc]  # Django is untyped
    help = ("Lint the SQL of unapplied migrations (all with --all) for statements that take "
            "long locks, rewrite tables or break running code; findings point at the "
            "operation in the migration file.")
    requires_system_checks: ClassVar[list[str]] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("app_label", nargs="*", help="only these apps' migrations")
        parser.add_argument("--all", action="store_true",
                            help="every migration, applied or not (no database needed; the "
                                 "project's own apps unless app labels are given)")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS,
                            help="the alias whose migrations and ENGINE count")
        parser.add_argument("--format", choices=("text", "json", "github"), default="text")
        parser.add_argument("--dsn", help="a database to read table sizes from (optional, "
                                          "never written to): size-aware findings on large "
                                          "tables are errors, on small ones warnings")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report, linted = _lint(alias_connection(options["database"]), options)
        except core.PgsteadyError as exc:
            raise CommandError(str(exc), returncode=exc.exit_code) from exc
        self.stdout.write(core.lint_output.render(report, options["format"]), ending="")
        if options["format"] == "text":
            self.stderr.write(f"{core.lint_output.render_syntax_errors(report)}"
                              f"{core.lint_output.summary(report)}; runner profile django "
                              f"({len(linted)} migration(s))")
        if report.exit_code:
            sys.exit(report.exit_code)


def _lint(connection: Any, options: dict[str, Any]) -> tuple[core.LintReport, list[Any]]:
    from pgsteady.django.lint import lint  # noqa: PLC0415 - keeps --help quick

    config = core.load_config(None)
    return lint(connection, app_labels=options["app_label"], include_applied=options["all"],
                config=config, dsn=options["dsn"])
