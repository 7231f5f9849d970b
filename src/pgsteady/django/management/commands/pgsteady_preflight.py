"""``manage.py pgsteady_preflight``: who would block the pending migrations, by name.

Exit codes: 0 clear (nobody in the way, every lock known), 1 a session is in the way or a
migration's locks cannot be known (RunPython), 3 cannot connect.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections

from pgsteady.django import _pgsteady as core


class Command(BaseCommand):  # type: ignore[misc]  # Django is untyped
    help = ("Name the live sessions that hold or wait for locks the pending migrations need "
            "(exit 1 when any, or when a migration's locks cannot be known).")
    requires_system_checks: ClassVar[list[str]] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)

    def handle(self, *args: Any, **options: Any) -> None:
        from pgsteady.django.preflight import check  # noqa: PLC0415 - keeps --help quick

        try:
            report, rendered = check(connections[options["database"]])
        except core.PgsteadyError as exc:
            raise CommandError(str(exc), returncode=exc.exit_code) from exc
        for blocker in report.blockers:
            self.stdout.write(f"blocker: {blocker.describe(query_chars=80)}")
        for unknown in report.unknown:
            self.stdout.write(f"unknown: {unknown.describe()}")
        if report.blockers:
            self.stderr.write(report.summary())
        if not report.clear:
            sys.exit(1)
        self.stdout.write(f"ok: {len(rendered)} pending migration(s), nobody in their way")
