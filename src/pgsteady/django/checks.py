"""System checks (``manage.py check``): settings that look right and fail in production.

Each has an id, so a project can silence one (``SILENCED_SYSTEM_CHECKS``):

- ``pgsteady.E001``: an alias's ENGINE is ``pgsteady.django`` but the app is not in
  ``INSTALLED_APPS``: ``manage.py migrate`` would be Django's own, without lock retries, and
  nothing would say so. It rides on the backend's validation, so it runs in ``manage.py
  check --database <alias>`` and before every ``migrate``, which it stops; and in every
  ``check`` once the backend is loaded (Django loads it with the first model: the app's
  ``ready()`` cannot register a check when the app is missing).
- ``pgsteady.E002``: ``pooler = "transaction"`` with ``DISABLE_SERVER_SIDE_CURSORS = False``:
  ``QuerySet.iterator()`` opens a server-side cursor that the next query, on another server
  connection, cannot find ("cursor ... does not exist"). The ENGINE sets it to True when
  the setting is absent; only an explicit False is reported.
- ``pgsteady.E004``: ``OPTIONS["pgsteady"]`` is wrong (an unknown key, a value out of range):
  the alias would not connect.
- ``pgsteady.E003``: ``pooler = "direct"`` but the server refuses the startup ``options``
  parameter, as PgBouncer does: the alias goes through a pooler (``pooler = "session"`` or
  ``"transaction"``, as PgBouncer's ``pool_mode``). A database check: it connects.
"""

from __future__ import annotations

from typing import Any

from django.core import checks

# PgBouncer's answer to a startup parameter it does not track (``options``, among others).
POOLER_REFUSAL = "unsupported startup parameter"
REFUSED = "the server refused the startup parameter 'options', as PgBouncer does"
POOLER_HINT = ("set OPTIONS['pgsteady']['pooler'] to 'transaction' or 'session' (PgBouncer's "
               "pool_mode): the settings then go with each transaction or in one SET")


def _where(alias: str) -> str:
    return f"DATABASES[{alias!r}]"


def app_installed(alias: str) -> list[checks.CheckMessage]:
    """pgsteady.E001: the ENGINE without the app (its migrate, its commands)."""
    from django.apps import apps  # noqa: PLC0415 - the registry is ready when checks run

    if apps.is_installed("pgsteady.django"):
        return []
    return [checks.Error(
        f"{_where(alias)} uses ENGINE 'pgsteady.django' but the app 'pgsteady.django' is not "
        f"in INSTALLED_APPS: manage.py migrate is Django's own, without lock retries",
        hint="add 'pgsteady.django' to INSTALLED_APPS (it brings migrate with retries, "
             "pgsteady_lint and pgsteady_preflight)",
        id="pgsteady.E001")]


def server_side_cursors(alias: str, settings_dict: dict[str, Any], pooler: str) \
        -> list[checks.CheckMessage]:
    """pgsteady.E002: a transaction pooler and server-side cursors asked for explicitly."""
    if pooler != "transaction" or settings_dict.get("DISABLE_SERVER_SIDE_CURSORS", True):
        return []
    return [checks.Error(
        f"{_where(alias)} goes through a transaction pooler with "
        f"DISABLE_SERVER_SIDE_CURSORS = False: QuerySet.iterator() fails with \"cursor ... "
        f"does not exist\" when the pooler hands the next query to another server connection",
        hint="remove DISABLE_SERVER_SIDE_CURSORS (the ENGINE sets it to True under "
             "pooler='transaction') or set it to True",
        id="pgsteady.E002")]


def pooler_refused(exc: BaseException) -> bool:
    """True when a connection failed because a pooler refused the startup ``options``."""
    return POOLER_REFUSAL in str(exc)


def direct_but_pooled(connection: Any) -> list[checks.CheckMessage]:
    """pgsteady.E003: ``pooler = "direct"`` and the server refuses startup ``options``."""
    from django.db.utils import OperationalError  # noqa: PLC0415 - after django.setup()

    if connection.pgsteady.pooler != "direct":
        return []
    try:
        connection.ensure_connection()
    except OperationalError as exc:
        if not pooler_refused(exc):
            return []  # another fault: not this check's to report
        return [checks.Error(
            f"{_where(connection.alias)} has pooler 'direct' but {REFUSED}",
            hint=POOLER_HINT, id="pgsteady.E003")]
    return []


def for_alias(connection: Any, databases: bool) -> list[checks.CheckMessage]:
    """The checks of one alias whose ENGINE is pgsteady's; ``databases``: those that connect
    too (Django runs database checks only when asked: ``check --database``, ``migrate``)."""
    if connection.pgsteady_error:
        return [checks.Error(connection.pgsteady_error,
                             hint="see docs/django.md for the keys and their values",
                             id="pgsteady.E004")]
    pooler = connection.pgsteady.pooler
    found = server_side_cursors(connection.alias, connection.settings_dict, pooler)
    found += app_installed(connection.alias)
    if databases:
        found += direct_but_pooled(connection)
    return found


@checks.register()  # type: ignore[untyped-decorator]  # Django is untyped
def settings_checks(app_configs: Any = None, databases: Any = None, **kwargs: Any) \
        -> list[checks.CheckMessage]:
    """Registered when the backend or the app is loaded (always run, ``check --deploy``
    included): the settings-only checks of every pgsteady alias, without connecting."""
    from django.db import connections  # noqa: PLC0415 - after django.setup()

    found: list[checks.CheckMessage] = []
    for alias, settings_dict in connections.settings.items():
        if settings_dict.get("ENGINE") != "pgsteady.django" or (databases and
                                                                alias in databases):
            continue  # another ENGINE; or the alias's validation runs them all
        found += for_alias(connections[alias], databases=False)
    return found
