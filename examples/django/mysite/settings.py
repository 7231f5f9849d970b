"""Settings of the example: one database through pgsteady's backend.

The database comes from ``DATABASE_DSN`` (a libpq DSN: ``host=... dbname=... user=...``, or
a URL); ``PGSTEADY_POOLER`` says what is in between (direct, session or transaction).
"""

import os

from psycopg.conninfo import conninfo_to_dict

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-secret")
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "mysite.urls"  # the health probes

INSTALLED_APPS = [
    "pgsteady.django",  # migrate with retries, pgsteady_lint, pgsteady_preflight
    "django.contrib.contenttypes",
    "shop",
]

_dsn = conninfo_to_dict(os.environ.get("DATABASE_DSN", "dbname=shop"))
_env = os.environ.get

DATABASES = {
    "default": {
        "ENGINE": "pgsteady.django",
        "NAME": _dsn.get("dbname", "shop"),
        "USER": _dsn.get("user", ""),
        "PASSWORD": _dsn.get("password", ""),
        "HOST": _dsn.get("host", ""),
        "PORT": _dsn.get("port", ""),
        "OPTIONS": {
            **({"passfile": _dsn["passfile"]} if "passfile" in _dsn else {}),
            "pgsteady": {
                "service": "shop",
                "lock_timeout": float(_env("PGSTEADY_LOCK_TIMEOUT", "2")),
                "statement_timeout": 30,
                "idle_in_transaction_timeout": 60,
                "retry_budget": float(_env("PGSTEADY_RETRY_BUDGET", "60")),
                "pooler": _env("PGSTEADY_POOLER", "direct"),
            },
        },
    },
}

LOGGING = {
    "version": 1,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"pgsteady": {"handlers": ["stderr"], "level": "INFO"}},
}
