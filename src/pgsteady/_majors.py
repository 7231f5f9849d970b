"""PostgreSQL majors in one place: which ones pgsteady supports, and where each feature begins.

Every version gate in pgsteady asks this module (``supports(major, REINDEX_CONCURRENTLY)``)
instead of comparing numbers itself, so a new major or a feature's first major is one line
here (Django's ``db/backends/postgresql/features.py`` is the model). One number form: the
major (``14``); a server's ``server_version_num`` (``140013``) becomes one in
:func:`major_of`, and nowhere else. Imports nothing: lint, sql, lab and inspect all read it
at start-up.
"""

from __future__ import annotations

SUPPORTED = (13, 14, 15, 16, 17, 18)
"""The majors users run: the lab takes them, ``pg_versions`` tests run on each of them."""

PAST_END_OF_LIFE = (10, 11, 12)
"""Older majors ``scripts/postgres-versions.sh`` also installs: the old side of the gates below
(fast defaults came in 11, SET NOT NULL by a valid CHECK in 12), which tests run on."""

OLDEST_KNOWN = 9
"""The oldest major ``--pg-version`` takes (as ``9.6``); anything older is refused."""

LINT_DEFAULT = 14
"""The major lint assumes when nothing says otherwise (the oldest supported upstream in 2026)."""

# Each feature's first major (PostgreSQL's release notes name them).
IDENTITY_COLUMNS = 10               # GENERATED ... AS IDENTITY
RENAME_ENUM_VALUE = 10              # ALTER TYPE ... RENAME VALUE
FAST_COLUMN_DEFAULT = 11            # ADD COLUMN ... DEFAULT <non-volatile> without a rewrite
NOT_NULL_FROM_CHECK = 12            # SET NOT NULL skips its scan given CHECK (c IS NOT NULL)
REINDEX_CONCURRENTLY = 12           # REINDEX ... CONCURRENTLY
STORED_GENERATED_COLUMNS = 12       # GENERATED ALWAYS AS (...) STORED
DROP_DATABASE_FORCE = 13            # DROP DATABASE ... WITH (FORCE)
CLIENT_CONNECTION_CHECK_INTERVAL = 14  # the server drops a session whose client is gone
DETACH_PARTITION_CONCURRENTLY = 14  # ALTER TABLE ... DETACH PARTITION ... CONCURRENTLY
LOCK_WAITSTART = 14                 # pg_locks.waitstart
INITDB_NO_INSTRUCTIONS = 14         # initdb --no-instructions
INITDB_PWFILE_SCRAM = 14            # initdb --pwfile takes a SCRAM secret as it is
TRUNCATE_SPARES_PARENT = 14         # TRUNCATE of a partition no longer locks its parent
RESERVED_CONNECTIONS = 16           # reserved_connections + pg_use_reserved_connections
GRANT_LOCKS_RELATION = 18           # GRANT / REVOKE on a table locks it (ACCESS SHARE)


def supports(major: int, first: int) -> bool:
    """True if PostgreSQL ``major`` has the feature that came in major ``first``."""
    return major >= first


def major_of(server_version_num: int) -> int:
    """A server's ``server_version_num`` (psycopg's ``conn.info.server_version``) as its
    major: ``140013`` -> 14."""
    return server_version_num // 10000


def version_num_of(major: int) -> int:
    """A major in ``server_version_num`` form (``14`` -> ``140000``), only where an output
    already shows that form."""
    return major * 10000


def parsable(major: int) -> bool:
    """True if lint can be told to assume ``major`` (9.6 and on)."""
    return major >= OLDEST_KNOWN
