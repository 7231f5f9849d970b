"""Health probes for a Django project: an alias's database as a :class:`~pgsteady.health.Check`,
and views that serve :class:`~pgsteady.health.Health`'s reports::

    # urls.py
    from django.urls import include, path
    from pgsteady.django.health import db_check, health_urls
    from pgsteady.health import Health

    health = Health({"db": db_check("default")}, service="shop")
    urlpatterns = [path("health/", include(health_urls(health)))]

``health/live`` (no I/O: the process answers), ``health/ready`` (``SELECT 1`` within the
probe's deadline, 1 s) and ``health/deep`` (whether the server is a primary, and its version),
200 or 503 with ``application/health+json``, as ``Health.wsgi()`` serves them elsewhere.
django-health-check's ``health_check.db`` writes, updates and deletes a row of a table of its
own (a migration, a write per probe, no deadline); this needs no table, writes nothing, and
each query is bounded by the probe's deadline (``statement_timeout``, ``LOCAL``).

The probes run on Health's own threads, where Django's request cycle never closes a
connection: each probe opens the alias's connection in its thread and closes it after, so no
probe thread holds one between probes (a probe is a connect and one query: what "ready"
should exercise).
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS

from pgsteady.django import _pgsteady as core

_DEEP = "SELECT pg_is_in_recovery(), current_setting('server_version')"


def _query(alias: str, sql: str, timeout: float) -> Any:
    """One row of ``sql`` on the alias, in a transaction whose statement_timeout is the
    probe's deadline; the thread's connection closed after."""
    from django.db import connections, transaction  # noqa: PLC0415 - after django.setup()

    connection = connections[alias]
    try:
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            cursor.execute("SELECT set_config('statement_timeout', %s, true)",
                           [f"{max(1, round(timeout * 1000))}ms"])
            cursor.execute(sql)
            return cursor.fetchone()
    finally:
        connection.close()


def db_check(alias: str = DEFAULT_DB_ALIAS) -> core.Check:
    """The alias's database as a health check: ready runs ``SELECT 1``, deep reports whether
    the server is a primary or a standby, each within the probe's deadline."""

    def ready(timeout: float) -> None:
        _query(alias, "SELECT 1", timeout)

    def deep(timeout: float) -> core.CheckResult:
        standby, version = _query(alias, _DEEP, timeout)
        return core.CheckResult(
            output=f"PostgreSQL {version}, {'standby' if standby else 'primary'}")

    return core.Check(ready, deep, "datastore")


def health_urls(health: core.Health) -> list[Any]:
    """URL patterns ``live``, ``ready`` and ``deep`` serving ``health``'s reports (GET and
    HEAD): ``include()`` them under a prefix."""
    from django.http import JsonResponse  # noqa: PLC0415 - after django.setup()
    from django.urls import path  # noqa: PLC0415
    from django.views.decorators.http import require_safe  # noqa: PLC0415

    def view(which: str) -> Any:
        probe = getattr(health, which)

        @require_safe  # type: ignore[untyped-decorator]  # Django is untyped
        def serve(_request: Any) -> Any:
            report = probe()
            response = JsonResponse(report, status=core.status_code(report),
                                    content_type=core.CONTENT_TYPE)
            response["Cache-Control"] = "no-store"
            return response

        return serve

    return [path(which, view(which), name=f"pgsteady-health-{which}")
            for which in ("live", "ready", "deep")]
