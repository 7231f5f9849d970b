"""``DATABASES[alias]["OPTIONS"]["pgsteady"]``: read once, checked, one clear line if wrong.

::

    "OPTIONS": {"pgsteady": {
        "service": "shop",            # application_name = shop@host:pid
        "lock_timeout": 2,            # seconds (or a timedelta); also migrate's cap per try
        "statement_timeout": 30,      # the backstop for every query the service sends
        "idle_in_transaction_timeout": 60,
        "retry_budget": 120,          # migrate: all tries and waits of one migration
        "pooler": "direct",           # direct | session | transaction (PgBouncer's modes)
        "migrate": {"first_lock_timeout": 0.1, "retries": 10, ...},  # any Policy field
    }}

The key is taken out of what Django passes to psycopg. Wrong values raise Django's
``ImproperlyConfigured`` naming the alias and the key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from pgsteady.django import _pgsteady as core

KEY = "pgsteady"
DEFAULT_SERVICE = "django"
_DURATIONS = ("lock_timeout", "statement_timeout", "idle_in_transaction_timeout",
              "retry_budget")
_KNOWN = frozenset({*_DURATIONS, "service", "pooler", "migrate"})
_POLICY_FIELDS = frozenset(f.name for f in dataclasses.fields(core.Policy))


@dataclass(frozen=True)
class Options:
    """What one alias asked for: the sessions' settings and the migration policy."""

    session: core.SessionSettings
    policy: core.Policy

    @property
    def pooler(self) -> str:
        return self.session.pooler


def _seconds(alias: str, name: str, value: Any) -> float | None:
    try:
        return core.server_timeout(value, name)
    except core.UsageError as exc:
        raise ImproperlyConfigured(f"DATABASES[{alias!r}]['OPTIONS']['pgsteady']: {exc}") \
            from None


def parse(alias: str, given: Any) -> Options:
    """``OPTIONS["pgsteady"]`` (a dict, or None for the defaults) as :class:`Options`."""
    where = f"DATABASES[{alias!r}]['OPTIONS']['pgsteady']"
    given = {} if given is None else given
    if not isinstance(given, dict):
        raise ImproperlyConfigured(f"{where} must be a dict, got {type(given).__name__}")
    unknown = sorted(set(given) - _KNOWN)
    if unknown:
        raise ImproperlyConfigured(f"{where}: unknown key(s) {', '.join(unknown)}; known: "
                                   f"{', '.join(sorted(_KNOWN))}")
    seconds = {name: _seconds(alias, name, given[name]) for name in _DURATIONS if name in given}
    defaults = core.SessionSettings()
    try:
        session = core.SessionSettings(
            service=str(given.get("service") or DEFAULT_SERVICE),
            statement_timeout=seconds.get("statement_timeout", defaults.statement_timeout),
            lock_timeout=seconds.get("lock_timeout", defaults.lock_timeout),
            idle_in_transaction_timeout=seconds.get("idle_in_transaction_timeout",
                                                    defaults.idle_in_transaction_timeout),
            pooler=str(given.get("pooler") or "direct"))
        policy = _policy(where, given, seconds)
    except core.UsageError as exc:
        raise ImproperlyConfigured(f"{where}: {exc}") from None
    return Options(session, policy)


def _policy(where: str, given: dict[str, Any], seconds: dict[str, float | None]) \
        -> core.Policy:
    """migrate's policy: the alias's lock_timeout caps each try, retry_budget bounds them."""
    extra = given.get("migrate") or {}
    if not isinstance(extra, dict):
        raise ImproperlyConfigured(f"{where}['migrate'] must be a dict of Policy fields")
    unknown = sorted(set(extra) - _POLICY_FIELDS)
    if unknown:
        raise ImproperlyConfigured(f"{where}['migrate']: unknown key(s) {', '.join(unknown)}; "
                                   f"known: {', '.join(sorted(_POLICY_FIELDS))}")
    fields: dict[str, Any] = {}
    if seconds.get("lock_timeout"):
        fields["lock_timeout"] = seconds["lock_timeout"]
    if seconds.get("retry_budget") is not None:
        fields["retry_budget"] = seconds["retry_budget"]
    fields.update(extra)
    return core.Policy(**fields)
