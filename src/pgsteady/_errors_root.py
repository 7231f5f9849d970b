"""The root of pgsteady's exception hierarchy and the exit codes, free of psycopg.

:mod:`pgsteady.errors` re-exports everything here and adds the errors that subclass psycopg's;
it is the module to import from. This one exists so that a plain ``pgsteady lint`` (which
never touches a database) can raise and report errors without importing psycopg.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_CANNOT_CONNECT = 3


class PgsteadyError(Exception):
    """Root of every error pgsteady raises on purpose."""

    exit_code: int = EXIT_FAILURE


class UsageError(PgsteadyError):
    """Arguments or input the user can fix; the message says how."""

    exit_code = EXIT_USAGE
