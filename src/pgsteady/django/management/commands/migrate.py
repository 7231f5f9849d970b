"""``manage.py migrate``, each migration applied all or nothing with lock retries.

Django's own command, with :class:`~pgsteady.django.executor.SteadyExecutor` in place of its
executor for aliases whose ENGINE is ``pgsteady.django`` (others migrate as Django does). A
migration that cannot get its locks within the retry budget, or fails, ends the command
with one ``CommandError:`` line naming the blocking session, exit code 1 (2 for a usage
error: a transaction pooler in the way).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.management.base import CommandError
from django.core.management.commands import migrate as django_migrate

from pgsteady.django import _pgsteady as core
from pgsteady.django.executor import SteadyExecutor
from pgsteady.django.project import connection as alias_connection


@contextmanager
def _steady_executor() -> Iterator[None]:
    """Django's command builds its executor from its module's global; it builds ours for the
    length of one command."""
    original = django_migrate.MigrationExecutor
    django_migrate.MigrationExecutor = SteadyExecutor
    try:
        yield
    finally:
        django_migrate.MigrationExecutor = original


class Command(django_migrate.Command):  # type: ignore[misc]  # Django is untyped
    help = (django_migrate.Command.help + " pgsteady: each migration under a short "
            "lock_timeout, retried within the retry budget, all of it or nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            alias_connection(options["database"])  # a wrong OPTIONS["pgsteady"]: one line
            with _steady_executor():
                super().handle(*args, **options)
        except core.PgsteadyError as exc:
            raise CommandError(str(exc), returncode=exc.exit_code) from exc
