"""The lock-queue lab's SQL in one place: the schema, its data, and what the sampler reads.

The sampler's queries read only catalogs and statistics views (``pg_stat_activity``,
``pg_locks``, ``pg_attribute``): none of them takes a lock on ``orgs``, so none of them can
queue behind the migration they are watching.
"""

from __future__ import annotations

from typing import LiteralString

SCHEMA: tuple[LiteralString, ...] = (
    "CREATE TABLE orgs (id bigint PRIMARY KEY, name text NOT NULL, settings jsonb NOT NULL)",
    "CREATE TABLE request_log (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
    "org_id bigint NOT NULL REFERENCES orgs (id), status int NOT NULL, "
    "at timestamptz NOT NULL DEFAULT now(), body text NOT NULL)",
    "CREATE INDEX request_log_org_id ON request_log (org_id, id)",
)
FILL_ORGS: LiteralString = (
    "INSERT INTO orgs SELECT g, 'org-' || g, jsonb_build_object('rate_limit', 100 + g %% 900, "
    "'providers', jsonb_build_array('openai', 'anthropic')) "
    "FROM generate_series(1, %(orgs)s) g")
FILL_LOG: LiteralString = (
    "INSERT INTO request_log (org_id, status, body) SELECT 1 + g %% %(orgs)s, "
    "CASE WHEN g %% 50 = 0 THEN 500 ELSE 200 END, repeat('x', 64) "
    "FROM generate_series(1, %(rows)s) g")

# PostgreSQL's words when it refuses a connection for lack of slots (FATAL 53300): all taken,
# or only the superusers' reserved ones left ("... reserved for non-replication superuser
# connections" in 15, "... reserved for roles with the SUPERUSER attribute" from 16).
REFUSED = ("sorry, too many clients already", "remaining connection slots are reserved")

SESSIONS: LiteralString = (
    "SELECT count(*), count(*) FILTER (WHERE wait_event_type = 'Lock') "
    "FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
CLIENT_PORTS: LiteralString = (
    "SELECT client_port FROM pg_stat_activity WHERE backend_type = 'client backend' "
    "AND client_port IS NOT NULL AND pid <> pg_backend_pid()")
ORGS_OID: LiteralString = (
    "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'public' AND c.relname = 'orgs'")
LOCK_QUEUE: LiteralString = (
    "SELECT count(*) FROM pg_locks WHERE relation = %(oid)s AND NOT granted "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
MIGRATION_SESSIONS: LiteralString = (
    "SELECT pid, coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity "
    "WHERE datname = current_database() AND state = 'active' "
    "AND query ILIKE 'ALTER TABLE orgs%%'")
COLUMN_ADDED: LiteralString = (
    "SELECT count(*) FROM pg_attribute WHERE attrelid = %(oid)s AND attname = 'region' "
    "AND NOT attisdropped")
# Long queries: sessions holding a granted lock on orgs with a statement running for over a
# second (the log scan, whether it runs as a plain statement or as a cursor's FETCH).
LONG_QUERIES: LiteralString = (
    "SELECT DISTINCT a.pid, extract(epoch FROM now() - a.query_start)::float8 "
    "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.relation = %(oid)s AND l.granted "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND a.state = 'active' AND a.query_start < now() - interval '1 second' "
    "AND a.query NOT ILIKE 'ALTER TABLE%%' AND a.pid <> pg_backend_pid()")
