"""Every SQL statement the inspect subsystem sends, by name.

All of them read catalogs and statistics views only: no function that takes a lock on a user
relation (``pg_relation_size``, ``pg_total_relation_size``, ``pg_indexes_size``...), so none of
them can queue behind a waiting ACCESS EXCLUSIVE request. Sizes come from ``pg_class``.
"""

from __future__ import annotations

from pgsteady import _majors

# Settings doctor judges, and the ones it needs for connection arithmetic.
SETTING_NAMES = (
    "statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout",
    "idle_session_timeout", "client_connection_check_interval", "tcp_keepalives_idle",
    "tcp_keepalives_interval", "tcp_keepalives_count", "log_lock_waits",
    "log_min_duration_statement", "deadlock_timeout", "max_connections",
    "superuser_reserved_connections", "reserved_connections", "block_size",
)

# Doctor's own transaction: short timeouts, set per transaction (works behind any pooler).
SET_TIMEOUTS = ("SELECT set_config('statement_timeout', %(statement)s, true), "
                "set_config('lock_timeout', %(lock)s, true)")

SERVER = """
SELECT current_setting('server_version_num')::int AS version_num,
       current_setting('server_version') AS version,
       current_database() AS database, current_user AS "user",
       coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false) AS superuser,
       pg_backend_pid() AS own_pid,
       inet_client_addr() IS NULL AS via_socket
"""

# Read before doctor sets its own timeouts, so ``setting`` is what a session of this role in
# this database starts with (server, database and role settings applied).
SETTINGS = """
SELECT name, setting, reset_val, coalesce(unit, '') AS unit, source, sourcefile, sourceline
FROM pg_settings WHERE name = ANY(%(names)s)
"""

# Per-database and per-role settings (ALTER DATABASE / ALTER ROLE ... SET).
OVERRIDES = """
SELECT coalesce(d.datname::text, '') AS database, coalesce(r.rolname::text, '') AS role,
       split_part(cfg, '=', 1) AS name, substr(cfg, strpos(cfg, '=') + 1) AS value
FROM pg_db_role_setting s
LEFT JOIN pg_database d ON d.oid = s.setdatabase
LEFT JOIN pg_roles r ON r.oid = s.setrole
CROSS JOIN LATERAL unnest(s.setconfig) AS cfg
WHERE split_part(cfg, '=', 1) = ANY(%(names)s)
ORDER BY 1, 2, 3
"""

# Every other backend, with ages in seconds and, for the ones waiting on a lock, who blocks
# them (pg_blocking_pids is called only for those: it reads the whole lock table each time).
# backend_start and the raw usename tell a session from a later one given the same pid.
# A role without pg_read_all_stats (pg_monitor) gets other roles' rows with state, wait event,
# query and times hidden (NULL, query '<insufficient privilege>'): ``hidden`` says so, and
# such a session's waits are read from pg_locks, which every role sees, so a lock queue is
# still found (pg_blocking_pids needs no privilege either).
_SESSION_COLUMNS = r"""
       a.pid, coalesce(a.datname::text, '') AS database, coalesce(a.usename::text, '') AS "user",
       coalesce(a.application_name, '') AS application_name,
       host(a.client_addr) AS client_addr, a.client_port,
       coalesce(a.backend_type, '') AS backend_type, coalesce(a.state, '') AS state,
       extract(epoch FROM now() - a.backend_start)::float8 AS backend_age,
       extract(epoch FROM now() - a.xact_start)::float8 AS xact_age,
       extract(epoch FROM now() - a.query_start)::float8 AS query_age,
       extract(epoch FROM now() - a.state_change)::float8 AS state_age,
       a.wait_event_type, a.wait_event,
       age(a.backend_xmin)::int8 AS xmin_age_xids,
       coalesce(r.rolsuper, false) AS superuser,
       CASE WHEN a.backend_type IS NULL THEN '' ELSE
       left(regexp_replace(coalesce(a.query, ''), '\s+', ' ', 'g'), %(query_chars)s) END AS query,
       CASE WHEN a.wait_event_type = 'Lock' THEN pg_blocking_pids(a.pid)
            WHEN a.backend_type IS NULL
                 AND a.pid IN (SELECT w.pid FROM pg_locks w WHERE NOT w.granted)
                 THEN pg_blocking_pids(a.pid)
            ELSE '{}'::int[] END AS blocked_by,
       a.backend_start, a.usename::text AS usename,
       a.backend_type IS NULL AS hidden
FROM pg_stat_activity a LEFT JOIN pg_roles r ON r.oid = a.usesysid
"""
SESSIONS = f"""
SELECT {_SESSION_COLUMNS}
WHERE a.pid <> pg_backend_pid()
ORDER BY a.pid
"""

# One read of the lock table: every lock someone waits for, and the granted locks on the same
# objects (what the waiters wait behind). Relation names come from pg_class, never from a
# function that would lock the relation.
_LOCKS = """
WITH l AS MATERIALIZED (
    SELECT *, concat_ws(':', locktype, coalesce(database, 0), coalesce(relation, 0),
                        coalesce(page, -1), coalesce(tuple, -1), coalesce(virtualxid, ''),
                        coalesce(transactionid::text, ''), coalesce(classid, 0),
                        coalesce(objid, 0), coalesce(objsubid, -1)) AS object
    FROM pg_locks WHERE pid IS NOT NULL AND pid <> pg_backend_pid())
SELECT l.pid, l.locktype, l.mode, l.granted,
       l.relation::int8 AS relation_oid,
       CASE WHEN c.oid IS NOT NULL THEN n.nspname || '.' || c.relname
            WHEN l.relation IS NOT NULL THEN 'oid ' || l.relation || ' in database '
                 || coalesce((SELECT datname FROM pg_database WHERE oid = l.database), '?')
       END AS relation,
       {wait_age} AS wait_age
FROM l
LEFT JOIN pg_class c ON c.oid = l.relation
     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT l.granted OR l.object IN (SELECT object FROM l WHERE NOT granted)
ORDER BY l.pid
"""



def locks(version_num: int) -> str:
    """LOCKS for this server: pg_locks.waitstart exists from PostgreSQL 14 on."""
    wait_age = ("extract(epoch FROM now() - l.waitstart)::float8" if _majors.supports(
        _majors.major_of(version_num), _majors.LOCK_WAITSTART)
                else "NULL::float8")
    return _LOCKS.replace("{wait_age}", wait_age)


REPLICATION_SLOTS = """
SELECT slot_name::text, slot_type, active, active_pid, coalesce(database::text, '') AS database,
       age(xmin)::int8 AS xmin_age_xids, age(catalog_xmin)::int8 AS catalog_xmin_age_xids
FROM pg_replication_slots
WHERE xmin IS NOT NULL OR catalog_xmin IS NOT NULL
"""

PREPARED_XACTS = """
SELECT gid, owner::text, database::text, extract(epoch FROM now() - prepared)::float8 AS age,
       age(transaction)::int8 AS xid_age
FROM pg_prepared_xacts ORDER BY prepared
"""

# Indexes left INVALID (a failed CREATE INDEX CONCURRENTLY), sizes from pg_class.relpages.
INVALID_INDEXES = """
SELECT n.nspname::text AS schema, c.relname::text AS index, t.relname::text AS "table",
       c.relpages::int8 * current_setting('block_size')::int8 AS bytes,
       EXISTS (SELECT 1 FROM pg_stat_progress_create_index p
               WHERE p.index_relid = c.oid) AS building
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_class t ON t.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT i.indisvalid
ORDER BY 1, 2
"""

# blockers --terminate / --cancel: the one pid given, nothing else. The session is read on
# the connection that will end it (so ``own`` is that connection's pid), and ended only if
# the pid still belongs to the session shown: pids are reused, and the question may wait.
SESSION = f"""
SELECT {_SESSION_COLUMNS}
WHERE a.pid = %(pid)s
"""
SESSION_ALIVE = "SELECT count(*) FROM pg_stat_activity WHERE pid = %(pid)s"
_SAME_SESSION = ("FROM pg_stat_activity WHERE pid = %(pid)s AND backend_start = %(backend_start)s "
                 "AND usename IS NOT DISTINCT FROM %(usename)s")
TERMINATE = f"SELECT pg_terminate_backend(pid) {_SAME_SESSION}"
CANCEL = f"SELECT pg_cancel_backend(pid) {_SAME_SESSION}"
# Another role's session, seen without pg_read_all_stats (backend_start hidden): named by its
# user, its database and its transaction as pg_locks shows it to every role.
TRANSACTION_OF = ("SELECT virtualtransaction FROM pg_locks WHERE pid = %(pid)s "
                  "AND virtualtransaction IS NOT NULL LIMIT 1")
_SAME_HIDDEN = ("FROM pg_stat_activity a WHERE a.pid = %(pid)s "
                "AND a.usename IS NOT DISTINCT FROM %(usename)s "
                "AND coalesce(a.datname::text, '') = %(database)s "
                "AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid "
                "AND l.virtualtransaction = %(transaction)s)")
TERMINATE_HIDDEN = f"SELECT pg_terminate_backend(a.pid) {_SAME_HIDDEN}"
CANCEL_HIDDEN = f"SELECT pg_cancel_backend(a.pid) {_SAME_HIDDEN}"
