"""The app that brings ``migrate`` with retries, ``pgsteady_lint`` and ``pgsteady_preflight``."""

from __future__ import annotations

from django.apps import AppConfig


class PgsteadyConfig(AppConfig):  # type: ignore[misc]  # Django is untyped
    """Labelled ``pgsteady``: the default label, ``django``, would read as Django's own."""

    name = "pgsteady.django"
    label = "pgsteady"
    verbose_name = "pgsteady"

    def ready(self) -> None:
        """Register the system checks (:mod:`.checks`), ``check --deploy`` included."""
        from pgsteady.django import checks  # noqa: F401, PLC0415 - registers on import
