"""Every SQL statement the migrate subsystem sends of its own, by name.

Identifiers are composed with ``psycopg.sql``; values always travel as parameters.
"""

from __future__ import annotations

from typing import LiteralString

from psycopg import sql

from pgsteady.tools._base import TRY_STARTED as _TRY_STARTED

# One bigint key for "a pgsteady migration runner is active in this database".
# Both 32-bit halves are below 2**31, so pg_locks.classid/objid show them unchanged.
RUNNER_LOCK_HI = 0x70677374  # "pgst"
RUNNER_LOCK_LO = 0x6D696772  # "migr"
RUNNER_LOCK_KEY = (RUNNER_LOCK_HI << 32) | RUNNER_LOCK_LO

# Session settings local to the current transaction (is_local = true) or to the session.
SET_LOCAL = "SELECT set_config(%(name)s, %(value)s, true)"
SET_SESSION = "SELECT set_config(%(name)s, %(value)s, false)"
SET_LOCAL_TIMEOUTS = ("SELECT set_config('lock_timeout', %(lock_timeout)s, true), "
                      "set_config('statement_timeout', %(statement_timeout)s, true), "
                      "set_config('pgsteady.try_started', clock_timestamp()::text, true)")
# Seconds since the try began (SET_LOCAL_TIMEOUTS noted when; else since its transaction did);
# the tools' history rows read the same clock (tools._base.THIS_TRY_MS).
TRY_SECONDS_EXPR = "extract(epoch FROM clock_timestamp() - " + _TRY_STARTED + ")::float8"
TRY_SECONDS = "SELECT " + TRY_SECONDS_EXPR

TRY_RUNNER_LOCK = "SELECT pg_try_advisory_lock(%(key)s::int8)"
RELEASE_RUNNER_LOCK = "SELECT pg_advisory_unlock(%(key)s::int8)"
# What the tools' own lock keys are made of (tools.LockPlace).
DATABASE_AND_SCHEMA = "SELECT current_database()::text, current_schema()::text"

# Columns every "who is this session" query returns, in this order (see preflight.Session).
_SESSION_COLUMNS = """
    a.pid, coalesce(a.application_name, '') AS application_name,
    coalesce(a.usename::text, '') AS usename, host(a.client_addr) AS client_addr,
    coalesce(a.state, '') AS state,
    extract(epoch FROM now() - a.xact_start)::float8 AS xact_age,
    extract(epoch FROM now() - a.query_start)::float8 AS query_age,
    -- whole (track_activity_query_size bounds it): secrets are masked before it is cut
    regexp_replace(coalesce(a.query, ''), '\\s+', ' ', 'g') AS query
"""

RUNNER_LOCK_HOLDER = f"""
SELECT {_SESSION_COLUMNS}
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = %(hi)s::int8::oid AND l.objid = %(lo)s::int8::oid AND l.objsubid = 1
"""

# Sessions holding or waiting for a lock on any of the relations (filtered by mode in Python,
# with the conflict table in analysis.LockMode).
# Does RELATION_LOCKERS have anything to find at all? (Cheaper than resolving what the
# pending statements lock, on a database nobody else is using.)
ANY_RELATION_LOCKER = """
SELECT EXISTS (SELECT FROM pg_locks l
               WHERE l.locktype = 'relation'
                 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                 AND l.pid <> pg_backend_pid())
"""

RELATION_LOCKERS = f"""
SELECT {_SESSION_COLUMNS},
    l.relation::int8 AS relation_oid, l.relation::regclass::text AS relation,
    l.mode, l.granted,
    extract(epoch FROM now() - l.waitstart)::float8 AS wait_age
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'relation'
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.relation = ANY(%(oids)s::oid[])
  AND l.pid <> pg_backend_pid()
ORDER BY a.xact_start NULLS LAST, a.pid
"""

# Sessions whose snapshot CREATE INDEX CONCURRENTLY would have to wait out.
OLD_SNAPSHOTS = f"""
SELECT {_SESSION_COLUMNS}
FROM pg_stat_activity a
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
  AND a.backend_xmin IS NOT NULL AND a.backend_type = 'client backend'
  AND now() - a.xact_start >= make_interval(secs => %(min_age)s)
ORDER BY a.xact_start, a.pid
"""

# The index named %(index)s on table %(table)s (a quoted, possibly qualified name): an index
# lives in its table's schema, so it is looked up there, never through search_path alone.
INDEX_VALIDITY = """
SELECT c.oid::int8, i.indisvalid, n.nspname::text, c.relname::text
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE i.indrelid = to_regclass(%(table)s) AND c.relname = %(index)s
"""


def drop_index_concurrently(schema: str, name: str) -> sql.Composed:
    return sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(schema, name))


RELATION_EXISTS = "SELECT to_regclass(%(name)s) IS NOT NULL"

# Which backend we are on, and the port the server itself listens on (not a pooler's).
BACKEND_AND_PORT = "SELECT pg_backend_pid(), inet_server_port()"


# --- history tables: pgsteady's and other tools' (each tool's statements live in its module
# of pgsteady.tools) ---
# Rows are read as jsonb, so older or newer versions of a table (a column more or less) read
# the same way.


def history_rows(schema: str, table: str, order_by: str) -> sql.Composed:
    # jsonb keeps every column; ordered by one of them (the tool's own order)
    return sql.SQL("SELECT to_jsonb(h) FROM {} h ORDER BY {}").format(
        sql.Identifier(schema, table), sql.Identifier(order_by))


# Tables named as some migration runner's history, in the schemas a run uses, with their
# columns (tools.histories tells whose each is).
HISTORY_TABLES = """
SELECT n.nspname::text, c.relname::text, array_agg(a.attname::text ORDER BY a.attnum)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relkind IN ('r', 'p') AND n.nspname = ANY(%(schemas)s)
  AND (c.relname = ANY(%(names)s) OR c.relname LIKE ANY(%(patterns)s))
GROUP BY 1, 2
ORDER BY 1, 2
"""


def rows_up_to(schema: str, table: str, limit: int) -> sql.Composed:
    """How many rows ``schema.table`` holds, counted up to ``limit``."""
    return sql.SQL("SELECT count(*) FROM (SELECT FROM {} LIMIT {}) AS r").format(
        sql.Identifier(schema, table), sql.Literal(limit))


HISTORY_COLUMN_EXISTS = """
SELECT EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = to_regclass(%(table)s) AND attname = %(column)s
                 AND NOT attisdropped)
"""

def history_statement(template: LiteralString, schema: str, table: str) -> sql.Composed:
    """A HISTORY_* template with every ``{}`` the qualified history table."""
    name = sql.Identifier(schema, table)
    return sql.SQL(template).format(*([name] * template.count("{}")))


# The catalog, as text, of every user relation: what "the schema is unchanged" compares.
SCHEMA_SNAPSHOT = """
SELECT n.nspname || '.' || c.relname || ' ' || c.relkind::text || ' ' || concat_ws(' | ',
    (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
                       || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), ''),
                       ', ' ORDER BY a.attnum)
     FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
    (SELECT string_agg(pg_get_constraintdef(k.oid), ', ' ORDER BY k.conname)
     FROM pg_constraint k WHERE k.conrelid = c.oid),
    (SELECT pg_get_indexdef(c.oid) || CASE WHEN i.indisvalid THEN '' ELSE ' INVALID' END
     FROM pg_index i WHERE i.indexrelid = c.oid))
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%%'
  AND c.relkind IN ('r', 'p', 'i', 'I', 'v', 'm', 'S', 'f')
ORDER BY 1
"""


# --- Lock targets -> existing relations (migrate/resolve.py). Each returns rows of
# (oid, "schema.name") for the relations reached from %(oid)s (or %(name)s) that way.
_QUALIFIED = "n.nspname::text || '.' || c.relname::text"

# A relation as written -> its oid, name, kind, whether it has children or is a partition,
# and for an index the table's oid.
RESOLVE_TARGET = f"""
SELECT c.oid::int8, {_QUALIFIED}, c.relkind::text, c.relhassubclass, c.relispartition,
       i.indrelid::int8
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index i ON i.indexrelid = c.oid
WHERE c.oid = to_regclass(%(name)s)
"""

_REACHED = f"""
SELECT c.oid::int8, {_QUALIFIED}
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid IN ({{}}) ORDER BY 2
"""

REACH_QUERIES: dict[str, str] = {
    "descendants": _REACHED.format("""
        WITH RECURSIVE tree(oid) AS (
            SELECT inhrelid FROM pg_inherits WHERE inhparent = %(oid)s
            UNION SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.oid)
        SELECT oid FROM tree"""),
    # Only a partition's parent is locked when it goes; an inheritance child's is not.
    "parent": _REACHED.format("""
        SELECT i.inhparent FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid
        WHERE i.inhrelid = %(oid)s AND p.relispartition"""),
    # The table of an index, and of each partition of a partitioned index.
    "index table": _REACHED.format("""
        WITH RECURSIVE tree(oid) AS (
            SELECT %(oid)s::oid
            UNION SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.oid)
        SELECT indrelid FROM pg_index WHERE indexrelid IN (SELECT oid FROM tree)"""),
    "default partition": _REACHED.format(
        "SELECT partdefid FROM pg_partitioned_table WHERE partrelid = %(oid)s"),
    "sibling default": _REACHED.format("""
        SELECT p.partdefid FROM pg_partitioned_table p
        JOIN pg_inherits i ON i.inhparent = p.partrelid WHERE i.inhrelid = %(oid)s"""),
    # Views (and materialized views) built on %(oid)s (on its column %(column)s, if given),
    # through views: DROP ... CASCADE.
    "dependent views": _REACHED.format("""
        WITH RECURSIVE users(oid) AS (
            SELECT r.ev_class FROM pg_depend d JOIN pg_rewrite r
              ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
            WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = %(oid)s
              AND r.ev_class <> %(oid)s
              AND (%(column)s::text IS NULL OR d.refobjsubid = (SELECT a.attnum
                   FROM pg_attribute a WHERE a.attrelid = %(oid)s AND a.attname = %(column)s))
            UNION
            SELECT r.ev_class FROM users JOIN pg_depend d
              ON d.refclassid = 'pg_class'::regclass AND d.refobjid = users.oid
            JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
            WHERE r.ev_class <> users.oid)
        SELECT oid FROM users"""),
    # Foreign keys of %(oid)s, optionally only those on column %(column)s or named
    # %(constraint)s: the tables they point at.
    "referenced": _REACHED.format("""
        SELECT k.confrelid FROM pg_constraint k
        WHERE k.contype = 'f' AND k.conrelid = %(oid)s
          AND (%(constraint)s::text IS NULL OR k.conname = %(constraint)s)
          AND (%(column)s::text IS NULL OR (SELECT a.attnum FROM pg_attribute a
               WHERE a.attrelid = %(oid)s AND a.attname = %(column)s) = ANY(k.conkey))"""),
    # Foreign keys pointing at %(oid)s (at column %(column)s, or through the unique index
    # of constraint %(constraint)s): the tables they are on.
    "referencing": _REACHED.format("""
        SELECT k.conrelid FROM pg_constraint k
        WHERE k.contype = 'f' AND k.confrelid = %(oid)s
          AND (%(constraint)s::text IS NULL OR k.conindid IN (
               SELECT u.conindid FROM pg_constraint u
               WHERE u.conrelid = %(oid)s AND u.conname = %(constraint)s))
          AND (%(column)s::text IS NULL OR (SELECT a.attnum FROM pg_attribute a
               WHERE a.attrelid = %(oid)s AND a.attname = %(column)s) = ANY(k.confkey))"""),
    # What a view or materialized view reads, through nested views.
    "reads": _REACHED.format("""
        WITH RECURSIVE reads(oid) AS (
            SELECT d.refobjid FROM pg_rewrite r JOIN pg_depend d
              ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
             AND d.refclassid = 'pg_class'::regclass
            WHERE r.ev_class = %(oid)s AND d.refobjid <> %(oid)s
            UNION
            SELECT d.refobjid FROM reads JOIN pg_rewrite r ON r.ev_class = reads.oid
            JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
             AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> reads.oid)
        SELECT oid FROM reads"""),
}

# Reaches that start from a name that is not a relation.
REACH_BY_NAME: dict[str, str] = {
    "statistics": _REACHED.format("""
        SELECT s.stxrelid FROM pg_statistic_ext s
        WHERE s.stxname = %(name)s AND (CASE WHEN %(schema)s::text IS NULL
              THEN pg_statistics_obj_is_visible(s.oid)
              ELSE s.stxnamespace = to_regnamespace(%(schema)s) END)"""),
    "domain users": _REACHED.format("""
        SELECT a.attrelid FROM pg_attribute a JOIN pg_class r ON r.oid = a.attrelid
        WHERE a.atttypid = to_regtype(%(qualified)s) AND NOT a.attisdropped
          AND r.relkind IN ('r', 'p', 'm')"""),
    "function users": _REACHED.format("""
        SELECT t.tgrelid FROM pg_trigger t JOIN pg_proc f ON f.oid = t.tgfoid
        WHERE f.proname = %(name)s AND (CASE WHEN %(schema)s::text IS NULL
              THEN pg_function_is_visible(f.oid)
              ELSE f.pronamespace = to_regnamespace(%(schema)s) END)"""),
    "schema": _REACHED.format("""
        SELECT r.oid FROM pg_class r
        WHERE r.relnamespace = to_regnamespace(%(name)s)
          AND r.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')"""),
}


# --- The blocker watch (migrate/watch.py): short limits, so it can never hang or queue.
BACKEND_PID = "SELECT pg_backend_pid()"
# One Alembic step commits and the next one's transaction opens, in one round trip.
COMMIT_AND_BEGIN = "COMMIT; BEGIN"
WATCH_SETUP = "SET statement_timeout = '2s'; SET lock_timeout = '100ms'"

# Who blocks backend %(pid)s now, and who blocks them (up to %(depth)s steps); for the
# direct blockers, the lock they hold (strongest) or wait for on the relation it waits for.
WATCH_BLOCKERS = f"""
WITH RECURSIVE chain(pid, blocked_pid, depth) AS (
    SELECT b, %(pid)s::int, 1 FROM unnest(pg_blocking_pids(%(pid)s::int)) AS b
    UNION
    SELECT b, chain.pid, chain.depth + 1
    FROM chain CROSS JOIN LATERAL unnest(pg_blocking_pids(chain.pid)) AS b
    WHERE chain.depth < %(depth)s::int
), wanted AS (
    SELECT relation FROM pg_locks
    WHERE pid = %(pid)s::int AND NOT granted AND locktype = 'relation' LIMIT 1
)
SELECT DISTINCT ON (a.pid) {_SESSION_COLUMNS}, chain.depth, chain.blocked_pid,
    (SELECT n.nspname::text || '.' || c.relname::text FROM wanted w
     JOIN pg_class c ON c.oid = w.relation JOIN pg_namespace n ON n.oid = c.relnamespace)
        AS relation,
    (SELECT h.mode FROM pg_locks h
     WHERE h.pid = a.pid AND h.granted AND h.locktype = 'relation'
       AND h.relation = (SELECT relation FROM wanted)
     ORDER BY array_position(ARRAY['AccessExclusiveLock', 'ExclusiveLock',
         'ShareRowExclusiveLock', 'ShareLock', 'ShareUpdateExclusiveLock', 'RowExclusiveLock',
         'RowShareLock', 'AccessShareLock'], h.mode::text) LIMIT 1) AS held_mode,
    (SELECT w.mode FROM pg_locks w
     WHERE w.pid = a.pid AND NOT w.granted AND w.locktype = 'relation'
       AND w.relation = (SELECT relation FROM wanted) LIMIT 1) AS waited_mode
FROM chain JOIN pg_stat_activity a ON a.pid = chain.pid
ORDER BY a.pid, chain.depth
"""

# RESOLVE_TARGET for many names (%(names)s, quoted as written) in one round trip.
RESOLVE_TARGETS = f"""
SELECT w.name, c.oid::int8, {_QUALIFIED}, c.relkind::text, c.relhassubclass, c.relispartition,
       i.indrelid::int8
FROM unnest(%(names)s::text[]) AS w(name)
JOIN pg_class c ON c.oid = to_regclass(w.name)
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index i ON i.indexrelid = c.oid
"""

# Every function of the given names (%(names)s, unqualified): where it is, whether an
# unqualified call finds its schema, its language, whether an extension brought it, and the
# CREATE FUNCTION text of a SQL or PL/pgSQL one outside PostgreSQL's own schemas (a body to
# read). Catalog only: pg_get_functiondef takes no lock on any table.
_FUNCTION_COLUMNS = """
p.oid::int8, n.nspname::text, p.proname::text, l.lanname::text, p.prokind::text,
n.nspname = ANY(pg_catalog.current_schemas(true)) AS on_path,
EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_proc'::regclass
        AND d.objid = p.oid AND d.deptype = 'e') AS in_extension,
CASE WHEN l.lanname IN ('sql', 'plpgsql') AND p.prokind IN ('f', 'p')
          AND n.nspname NOT IN ('pg_catalog', 'information_schema')
     THEN pg_catalog.pg_get_functiondef(p.oid) END AS definition
"""
FUNCTIONS_NAMED = f"""
SELECT {_FUNCTION_COLUMNS}
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE p.proname = ANY(%(names)s)
"""
# Every enabled trigger of the application's, by table (a database holds tens, not millions).
TRIGGERS = """
SELECT t.tgrelid::int8, t.tgrelid::regclass::text, t.tgname::text, t.tgtype::int,
       t.tgfoid::int8
FROM pg_catalog.pg_trigger t WHERE NOT t.tgisinternal AND t.tgenabled <> 'D'
"""
# Which of the given tables (%(oids)s) have a foreign key: a cascade may change their rows.
WITH_FOREIGN_KEYS = ("SELECT DISTINCT conrelid::int8 FROM pg_catalog.pg_constraint "
                     "WHERE contype = 'f' AND conrelid = ANY(%(oids)s)")
# FUNCTIONS_NAMED's columns for the functions of the given oids (%(oids)s).
FUNCTIONS_BY_OID = f"""
SELECT {_FUNCTION_COLUMNS}
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE p.oid = ANY(%(oids)s)
"""
# Whether the database holds code a statement could run that is not PostgreSQL's own nor an
# extension's C: a user trigger, or a function outside pg_catalog in another language.
USER_CODE = """
SELECT EXISTS (SELECT FROM pg_catalog.pg_trigger WHERE NOT tgisinternal)
    OR EXISTS (SELECT FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l ON l.oid = p.prolang
               WHERE p.pronamespace NOT IN ('pg_catalog'::regnamespace,
                                            'information_schema'::regnamespace)
                 AND NOT (l.lanname IN ('c', 'internal') AND EXISTS (
                     SELECT FROM pg_catalog.pg_depend d
                     WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid
                       AND d.deptype = 'e')))
"""
