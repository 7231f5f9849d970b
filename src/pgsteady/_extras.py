"""Optional dependencies (pyproject's extras): one clear error when one is missing.

pgsteady's core needs psycopg only; the command line (pglast, rich, orjson), Prometheus,
Redis, charts, the browser check, SQLAlchemy and Alembic come with extras. Without this, a
missing one surfaced as a bare ``ModuleNotFoundError`` traceback from deep inside pgsteady,
naming a module but not what to install. Every optional import goes through :func:`needs` (a
block of imports) or :func:`require` (one module), which turn it into :class:`MissingExtra`:
an ``ImportError`` (existing ``except ImportError`` clauses still work) and a ``UsageError``
(the CLI prints its one line and exits 2), whose message names the feature and the extra to
install::

    the exporter needs prometheus_client, which is not installed: pip install 'pgsteady[metrics]'
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from pgsteady._errors_root import UsageError

# extra -> the top-level modules it installs (pyproject.toml's optional-dependencies)
EXTRAS: dict[str, tuple[str, ...]] = {
    "cli": ("pglast", "rich", "orjson"),
    "metrics": ("prometheus_client",),
    "redis": ("redis",),
    "lab": ("matplotlib", "uvicorn", "pglast", "rich", "orjson"),
    "report": ("selenium",),
    "alembic": ("alembic", "sqlalchemy", "pglast"),
    "sqlalchemy": ("sqlalchemy",),
    "django": ("django",),
    "binary": ("psycopg_binary",),
}

# psycopg's ImportError when it finds no libpq (no psycopg_binary, no system library).
_NO_LIBPQ = ("no pq wrapper available", "libpq library not found")


class MissingExtra(UsageError, ImportError):
    """An optional dependency is not installed; the message says which extra brings it."""

    def __init__(self, module: str, extra: str, feature: str) -> None:
        which = "which are" if ", " in module else "which is"
        super().__init__(f"{feature} needs {module}, {which} not installed: "
                         f"pip install 'pgsteady[{extra}]'")
        self.name = module  # ImportError's attribute: the module that could not be imported
        self.extra = extra


def _missing(exc: ModuleNotFoundError, extra: str, feature: str) -> MissingExtra | None:
    """The error to raise instead of ``exc``, if ``exc`` is the extra's module missing (an
    import failing *inside* an installed package is left as it is: that is another fault)."""
    top = (exc.name or "").partition(".")[0]
    if top not in EXTRAS[extra]:
        return None
    import logging  # noqa: PLC0415 -- only on this error: `pgsteady lint` starts without it

    logging.getLogger("pgsteady.extras").debug("%s: %s is not installed (extra %r)", feature,
                                               exc.name, extra)
    return MissingExtra(top, extra, feature)


@contextmanager
def needs(extra: str, feature: str) -> Iterator[None]:
    """Imports in this block come from ``extra``; if one is missing, raise
    :class:`MissingExtra` naming ``feature`` (e.g. "the exporter")."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}")
    try:
        yield
    except ModuleNotFoundError as exc:
        missing = _missing(exc, extra, feature)
        if missing is None:
            raise
        raise missing from None


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """``import module`` (from ``extra``), or raise :class:`MissingExtra` naming ``feature``."""
    with needs(extra, feature):
        return importlib.import_module(module)


def libpq_missing(exc: BaseException, feature: str = "pgsteady") -> MissingExtra | None:
    """:class:`MissingExtra` naming ``pgsteady[binary]`` when ``exc`` is psycopg finding no
    libpq (``pgsteady[cli]`` on a machine without PostgreSQL's client library: psycopg is a
    dependency, its implementation the application's choice), else None."""
    seen: set[int] = set()
    one: BaseException | None = exc
    while one is not None and id(one) not in seen:
        seen.add(id(one))
        if isinstance(one, ImportError) and any(text in str(one) for text in _NO_LIBPQ):
            missing = MissingExtra("libpq", "binary", feature)
            missing.args = (f"{missing} (psycopg's own build of libpq), or install the "
                            f"system's libpq (Debian: apt-get install libpq5)",)
            return missing
        one = one.__cause__ or one.__context__
    return None
