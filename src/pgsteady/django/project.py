"""A Django project loaded from outside ``manage.py`` (``pgsteady lint --tool django``), and an
alias's connection with its settings' faults as one line (the commands, in and outside it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

import django
from pgsteady.django import _pgsteady as core


def setup(settings: str, alias: str = "default") -> Any:
    """``django.setup()`` with ``settings``, the current folder importable as ``manage.py``
    makes it; the alias's connection. A settings module that does not import is one line."""
    here = str(Path.cwd())
    if here not in sys.path:
        sys.path.insert(0, here)
    os.environ["DJANGO_SETTINGS_MODULE"] = settings
    try:
        django.setup()
    except (ImportError, ImproperlyConfigured) as exc:
        raise core.UsageError(f"--django-settings {settings}: {exc}; run from the project's "
                              f"folder (where manage.py is)") from None
    from django.db import connections  # noqa: PLC0415 - after django.setup()

    if alias not in connections:
        raise core.UsageError(f"no database alias {alias!r} in {settings}")
    return connection(alias)


def connection(alias: str) -> Any:
    """``connections[alias]``; a wrong ``OPTIONS["pgsteady"]`` (or another backend's
    ImproperlyConfigured, raised as it is made) is a UsageError, one line."""
    from django.db import connections  # noqa: PLC0415 - after django.setup()

    try:
        found = connections[alias]
    except ImproperlyConfigured as exc:
        raise core.UsageError(" ".join(str(exc).split())) from None
    if getattr(found, "pgsteady_error", ""):  # the ENGINE keeps it: see base.DatabaseWrapper
        raise core.UsageError(found.pgsteady_error)
    return found
