"""``manage.py pgsteady_preflight``: who would block the pending migrations, by name.

Exit codes: 0 clear (nobody in the way, every lock known or its migration reviewed with
``--accept-unknown``), 1 a session is in the way or a migration's locks cannot be known
(RunPython), 2 usage (an ``--accept-unknown`` that names no migration), 3 cannot connect.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS

from pgsteady.django import _pgsteady as core
from pgsteady.django.project import connection as alias_connection


class Command(BaseCommand):  # type: ignore[misc]  # Django is untyped
    help = ("Name the live sessions that hold or wait for locks the pending migrations need "
            "(exit 1 when any, or when a migration's locks cannot be known).")
    requires_system_checks: ClassVar[list[str]] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)
        parser.add_argument(
            "--accept-unknown", action="append", default=[], metavar="APP.MIGRATION",
            help="a pending migration whose unknown locks (RunPython) were reviewed: its "
                 "unknowns do not fail the check, blockers still do (repeat for several)")

    def handle(self, *args: Any, **options: Any) -> None:
        from pgsteady.django.preflight import check  # noqa: PLC0415 - keeps --help quick

        try:
            report, rendered, accepted = check(alias_connection(options["database"]),
                                               accept=options["accept_unknown"])
        except core.PgsteadyError as exc:
            raise CommandError(str(exc), returncode=exc.exit_code) from exc
        for blocker in report.blockers:
            self.stdout.write(f"blocker: {blocker.describe(query_chars=80)}")
        for unknown in report.unknown:
            self.stdout.write(f"unknown: {unknown.describe()}")
        for unknown in accepted:
            self.stdout.write(f"accepted: {unknown.describe()} (--accept-unknown)")
        if report.blockers:
            self.stderr.write(report.summary())
        if not report.clear:
            sys.exit(1)
        reviewed = f", {len(accepted)} unknown(s) accepted as reviewed" if accepted else ""
        self.stdout.write(f"ok: {len(rendered)} pending migration(s), nobody in their "
                          f"way{reviewed}")
