"""The lock oracle: what the analysis predicts each statement locks, against what it takes.

Each statement form runs on every installed PostgreSQL major from 13 to 18 (the
``pg_versions`` marker; ``scripts/postgres-versions.sh``) inside its own transaction (rolled
back), on one database per major set up once with every kind of relation a migration meets.
The prediction is made for that major (``analyze(..., pg_version=)``): where majors differ
(18's GRANT, 13's TRUNCATE of a partition) each is held to its own locks. The locks it
holds are read from ``pg_locks``; the prediction is ``analyze()`` + ``resolve.relations()``
against the same catalog, the very path preflight uses. The prediction must never be
weaker and never miss a relation; and, except for the few forms whose locks depend on the
data (``DEPENDS_ON_DATA``), it must name nothing the statement did not lock. Rules:

* relations the statement itself creates are ignored (they did not exist before it);
* system catalogs are ignored (every DDL statement locks some; no session of a service
  holds conflicting locks there);
* a lock on an index, a TOAST table or a sequence owned by a table counts as a lock on
  that table too (whoever uses them also locks the table), so a prediction on the table
  covers it;
* "never weaker" means the predicted mode conflicts with everything the taken mode
  conflicts with (:meth:`LockMode.covers`), not a higher number.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from pgsteady.migrate.bodies import Follower
from pgsteady.migrate.resolve import relations
from pgsteady.sql import opaque
from pgsteady.sql.analysis import LockMode, StatementInfo, Target, analyze, join

SETUP = """
CREATE TABLE parent (id int PRIMARY KEY, code text UNIQUE, note text);
CREATE TABLE child (
    id int PRIMARY KEY,
    parent_id int CONSTRAINT child_parent_fkey REFERENCES parent (id),
    parent_code text CONSTRAINT child_code_fkey REFERENCES parent (code),
    body text);
CREATE INDEX child_body_idx ON child (body);
CREATE INDEX child_lower_idx ON child (lower(body));
ALTER TABLE child ADD CONSTRAINT child_body_check CHECK (body <> '') NOT VALID;
INSERT INTO parent SELECT g, 'c' || g, 'n' FROM generate_series(1, 20) g;
INSERT INTO child SELECT g, g, 'c' || g, 'b' || g FROM generate_series(1, 20) g;
CREATE TABLE solo (id serial PRIMARY KEY, n int, t text, big text,
                   d timestamptz DEFAULT now());
INSERT INTO solo (n, t) SELECT g, 't' FROM generate_series(1, 20) g;
CREATE TABLE solo_log (id int, at timestamptz);
CREATE TABLE events (id int, at date NOT NULL, payload text) PARTITION BY RANGE (at);
CREATE TABLE events_2025 PARTITION OF events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE events_2026 PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
CREATE TABLE events_default PARTITION OF events DEFAULT;
INSERT INTO events VALUES (1, '2025-05-05', 'x'), (2, '2026-05-05', 'y');
CREATE INDEX events_at_idx ON events (at);
CREATE INDEX events_payload_idx ON ONLY events (payload);
CREATE INDEX events_2025_payload_idx ON events_2025 (payload);
CREATE TABLE events_loose (id int, at date NOT NULL, payload text);
CREATE TABLE logs (id int, at date NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE logs_2025 PARTITION OF logs FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE base (id int, kind text);
CREATE TABLE base_child (extra int) INHERITS (base);
CREATE TABLE orphan (id int, kind text);
CREATE VIEW parent_view AS
    SELECT p.id, c.body FROM parent p JOIN child c ON c.id = p.id;
CREATE VIEW nested_view AS SELECT * FROM parent_view;
CREATE VIEW solo_view AS SELECT id, n FROM solo;
CREATE MATERIALIZED VIEW solo_mv AS SELECT n, count(*) AS c FROM solo GROUP BY n;
CREATE UNIQUE INDEX solo_mv_n ON solo_mv (n);
CREATE SEQUENCE loose_seq;
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TRIGGER solo_touch BEFORE UPDATE ON solo FOR EACH ROW EXECUTE FUNCTION touch();
CREATE TRIGGER events_touch BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION touch();
CREATE POLICY solo_policy ON solo USING (n > 0);
CREATE RULE solo_log_rule AS ON DELETE TO solo_log DO INSTEAD NOTHING;
CREATE STATISTICS solo_stats (dependencies) ON n, t FROM solo;
CREATE DOMAIN positive AS int;
CREATE TABLE measures (id int, v positive);
CREATE TYPE mood AS ENUM ('ok', 'sad');
CREATE SCHEMA scratch;
CREATE TABLE scratch.thing (id int);
CREATE TABLE scratch.other (id int);
CREATE PUBLICATION pub_empty;
CREATE TABLE stock (id int PRIMARY KEY, n int);
INSERT INTO stock SELECT g, g FROM generate_series(1, 9) g;
CREATE TABLE stock_log (id int, n int);
CREATE TABLE stock_old (id int, n int);
INSERT INTO stock_old VALUES (1, 1), (2, 2);
CREATE TABLE stock_note (id int);
CREATE TABLE stock_audit (id int);
CREATE MATERIALIZED VIEW stock_mv AS SELECT count(*) AS c FROM stock;
CREATE FUNCTION stock_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  REFRESH MATERIALIZED VIEW stock_mv;
  INSERT INTO stock_log VALUES (NEW.id, NEW.n);
  RETURN NEW;
END$$;
CREATE TRIGGER stock_changed AFTER INSERT OR UPDATE ON stock
    FOR EACH ROW EXECUTE FUNCTION stock_changed();
CREATE FUNCTION stock_old_cleared() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  LOCK TABLE stock_audit IN EXCLUSIVE MODE;
  RETURN NULL;
END$$;
CREATE TRIGGER stock_old_cleared AFTER TRUNCATE ON stock_old
    FOR EACH STATEMENT EXECUTE FUNCTION stock_old_cleared();
CREATE FUNCTION backfill() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  ALTER TABLE stock_note ADD COLUMN note text;
  UPDATE stock SET n = n + 1 WHERE id = 1;
END$$;
CREATE FUNCTION count_notes() RETURNS bigint LANGUAGE sql AS 'SELECT count(*) FROM stock_note';
CREATE FUNCTION outer_count() RETURNS bigint LANGUAGE sql AS 'SELECT count_notes() + 1';
CREATE FUNCTION countdown(k int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  IF k > 0 THEN RETURN countdown(k - 1); END IF;
  LOCK TABLE stock_note IN SHARE MODE;
  RETURN 0;
END$$;
CREATE FUNCTION literal_execute() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('ALTER TABLE %I ADD COLUMN c int', 'stock_audit');
END$$;
CREATE PROCEDURE prune() LANGUAGE sql AS $$DELETE FROM stock_old WHERE id = 1$$;
"""

FORMS = [
    # ALTER TABLE: columns
    "ALTER TABLE solo ADD COLUMN flag boolean",
    "ALTER TABLE solo ADD COLUMN flag boolean NOT NULL DEFAULT false",
    "ALTER TABLE solo ADD COLUMN at timestamptz DEFAULT clock_timestamp()",
    "ALTER TABLE solo ADD COLUMN pid int REFERENCES parent (id)",
    "ALTER TABLE solo DROP COLUMN t",
    "ALTER TABLE child DROP COLUMN parent_id",
    "ALTER TABLE parent DROP COLUMN code CASCADE",
    "ALTER TABLE solo_log ALTER COLUMN id TYPE bigint",
    "ALTER TABLE child ALTER COLUMN parent_id TYPE bigint",
    "ALTER TABLE solo ALTER COLUMN big TYPE varchar(100)",
    "ALTER TABLE solo ALTER COLUMN n SET DEFAULT 0",
    "ALTER TABLE solo ALTER COLUMN d DROP DEFAULT",
    "ALTER TABLE solo ALTER COLUMN n SET NOT NULL",
    "ALTER TABLE solo ALTER COLUMN t DROP NOT NULL",
    "ALTER TABLE solo ALTER COLUMN n SET STATISTICS 500",
    "ALTER TABLE solo ALTER COLUMN n SET (n_distinct = 10)",
    "ALTER TABLE solo ALTER COLUMN n RESET (n_distinct)",
    "ALTER TABLE solo ALTER COLUMN big SET STORAGE EXTERNAL",
    "ALTER TABLE solo ALTER COLUMN big SET COMPRESSION pglz",
    "ALTER TABLE parent ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY",
    "ALTER TABLE solo RENAME COLUMN t TO title",
    "ALTER TABLE events ADD COLUMN source text",
    "ALTER TABLE events ALTER COLUMN payload SET NOT NULL",
    "ALTER TABLE ONLY events ALTER COLUMN payload SET DEFAULT ''",
    "ALTER TABLE base ADD COLUMN note text",
    "ALTER TABLE events RENAME COLUMN payload TO body",
    # ALTER TABLE: constraints
    "ALTER TABLE solo ADD CONSTRAINT solo_n_check CHECK (n > 0)",
    "ALTER TABLE solo ADD CONSTRAINT solo_n_check CHECK (n > 0) NOT VALID",
    "ALTER TABLE solo ADD CONSTRAINT solo_n_key UNIQUE (n)",
    "ALTER TABLE solo_log ADD PRIMARY KEY (id)",
    "ALTER TABLE solo ADD CONSTRAINT solo_n_fkey FOREIGN KEY (n) REFERENCES parent (id)",
    "ALTER TABLE solo ADD CONSTRAINT solo_n_fkey FOREIGN KEY (n) REFERENCES parent (id) "
    "NOT VALID",
    "ALTER TABLE solo ADD CONSTRAINT solo_ev FOREIGN KEY (n) REFERENCES parent (id) "
    "ON DELETE CASCADE",
    "ALTER TABLE child VALIDATE CONSTRAINT child_body_check",
    "ALTER TABLE child DROP CONSTRAINT child_parent_fkey",
    "ALTER TABLE child DROP CONSTRAINT child_body_check",
    "ALTER TABLE parent DROP CONSTRAINT parent_code_key CASCADE",
    "ALTER TABLE child RENAME CONSTRAINT child_body_check TO child_body_nonempty",
    "ALTER TABLE child ALTER CONSTRAINT child_parent_fkey DEFERRABLE",
    "ALTER TABLE events ADD CONSTRAINT events_id_check CHECK (id > 0)",
    # ALTER TABLE: the table as a whole
    "ALTER TABLE solo RENAME TO solo_renamed",
    "ALTER TABLE solo SET SCHEMA scratch",
    "ALTER TABLE solo OWNER TO oracle_reader",
    "ALTER TABLE solo SET (fillfactor = 70)",
    "ALTER TABLE solo SET (autovacuum_enabled = false)",
    "ALTER TABLE solo RESET (fillfactor)",
    "ALTER TABLE solo SET (toast.autovacuum_enabled = false)",
    "ALTER TABLE solo SET UNLOGGED",
    "ALTER TABLE solo CLUSTER ON solo_pkey",
    "ALTER TABLE solo SET WITHOUT CLUSTER",
    "ALTER TABLE solo REPLICA IDENTITY FULL",
    "ALTER TABLE solo ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE solo FORCE ROW LEVEL SECURITY",
    "ALTER TABLE solo DISABLE TRIGGER solo_touch",
    "ALTER TABLE solo ENABLE ALWAYS TRIGGER solo_touch",
    "ALTER TABLE solo DISABLE TRIGGER ALL",
    "ALTER TABLE solo_log DISABLE RULE solo_log_rule",
    "ALTER TABLE orphan INHERIT base",
    "ALTER TABLE base_child NO INHERIT base",
    "ALTER TABLE solo SET ACCESS METHOD heap",
    "ALTER TABLE solo SET TABLESPACE pg_default",
    # partitions
    "ALTER TABLE events ATTACH PARTITION events_loose "
    "FOR VALUES FROM ('2027-01-01') TO ('2028-01-01')",
    "ALTER TABLE events DETACH PARTITION events_2025",
    "ALTER TABLE events DETACH PARTITION events_default",
    "CREATE TABLE events_2027 PARTITION OF events "
    "FOR VALUES FROM ('2027-01-01') TO ('2028-01-01')",
    "ALTER INDEX events_payload_idx ATTACH PARTITION events_2025_payload_idx",
    "DROP TABLE events_2026",
    "DROP TABLE events",
    "TRUNCATE events",
    "TRUNCATE events_2025",
    "CREATE INDEX events_id_idx ON events (id)",
    "CREATE INDEX events_id_idx ON ONLY events (id)",
    "LOCK TABLE events IN SHARE MODE",
    "LOCK TABLE ONLY events IN SHARE MODE",
    "SELECT * FROM events",
    "INSERT INTO events VALUES (3, '2025-06-06', 'z')",
    "UPDATE events SET payload = 'w'",
    "ANALYZE events",
    # other tables
    "CREATE TABLE fresh (id int PRIMARY KEY, pid int REFERENCES parent (id))",
    "CREATE TABLE fresh (id int, CONSTRAINT fresh_fk FOREIGN KEY (id) REFERENCES child (id))",
    "CREATE TABLE fresh (LIKE solo INCLUDING ALL)",
    "CREATE TABLE fresh () INHERITS (base)",
    "CREATE TABLE fresh AS SELECT * FROM parent_view",
    "SELECT * INTO fresh FROM solo",
    "CREATE UNLOGGED TABLE fresh (id serial PRIMARY KEY)",
    "CREATE TEMPORARY TABLE fresh (id int)",
    "DROP TABLE solo CASCADE",
    "DROP TABLE orphan",
    "DROP TABLE child CASCADE",
    "DROP TABLE parent CASCADE",
    "DROP TABLE base_child",
    "DROP TABLE base CASCADE",
    "DROP TABLE IF EXISTS no_such_table",
    "TRUNCATE solo",
    "TRUNCATE solo RESTART IDENTITY",
    "TRUNCATE parent CASCADE",
    "TRUNCATE child",
    # indexes
    "CREATE INDEX solo_n_idx ON solo (n)",
    "CREATE UNIQUE INDEX solo_n_idx ON solo (n) WHERE n > 0",
    "DROP INDEX child_body_idx",
    "DROP INDEX events_at_idx",
    "ALTER INDEX events_at_idx RENAME TO events_when_idx",
    "ALTER INDEX child_body_idx RENAME TO child_body_index",
    "ALTER INDEX child_body_idx SET (fillfactor = 80)",
    "ALTER INDEX child_lower_idx ALTER COLUMN 1 SET STATISTICS 100",
    "ALTER INDEX child_body_idx SET TABLESPACE pg_default",
    "REINDEX INDEX child_body_idx",
    "REINDEX TABLE child",
    "CLUSTER solo USING solo_pkey",
    # views
    "CREATE VIEW fresh_view AS SELECT * FROM solo",
    "CREATE OR REPLACE VIEW solo_view AS SELECT id, n, t FROM solo",
    "CREATE OR REPLACE VIEW nested_view AS SELECT * FROM parent_view",
    "ALTER VIEW solo_view RENAME TO solo_view2",
    "ALTER VIEW solo_view ALTER COLUMN n SET DEFAULT 1",
    "ALTER VIEW solo_view SET (security_barrier = true)",
    "ALTER VIEW solo_view OWNER TO oracle_reader",
    "DROP VIEW nested_view",
    "DROP VIEW parent_view CASCADE",
    "CREATE MATERIALIZED VIEW fresh_mv AS SELECT * FROM nested_view",
    "REFRESH MATERIALIZED VIEW solo_mv",
    "ALTER MATERIALIZED VIEW solo_mv RENAME TO solo_mv2",
    "DROP MATERIALIZED VIEW solo_mv",
    "SELECT * FROM nested_view",
    "LOCK TABLE parent_view IN ACCESS EXCLUSIVE MODE",
    "UPDATE solo_view SET n = n + 1",
    # comments, grants, ownership
    "COMMENT ON TABLE solo IS 'x'",
    "COMMENT ON COLUMN solo.n IS 'x'",
    "COMMENT ON INDEX child_body_idx IS 'x'",
    "COMMENT ON VIEW solo_view IS 'x'",
    "COMMENT ON MATERIALIZED VIEW solo_mv IS 'x'",
    "COMMENT ON SEQUENCE loose_seq IS 'x'",
    "COMMENT ON CONSTRAINT child_parent_fkey ON child IS 'x'",
    "COMMENT ON TRIGGER solo_touch ON solo IS 'x'",
    "COMMENT ON POLICY solo_policy ON solo IS 'x'",
    "COMMENT ON RULE solo_log_rule ON solo_log IS 'x'",
    "COMMENT ON FUNCTION touch() IS 'x'",
    "COMMENT ON SCHEMA scratch IS 'x'",
    "GRANT SELECT ON solo TO oracle_reader",
    "REVOKE SELECT ON solo FROM oracle_reader",
    "GRANT SELECT ON ALL TABLES IN SCHEMA scratch TO oracle_reader",
    # triggers, rules, policies, statistics
    "CREATE TRIGGER solo_touch2 BEFORE INSERT ON solo FOR EACH ROW EXECUTE FUNCTION touch()",
    "CREATE TRIGGER ev_touch2 BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION touch()",
    "CREATE OR REPLACE TRIGGER solo_touch BEFORE UPDATE ON solo "
    "FOR EACH ROW EXECUTE FUNCTION touch()",
    "DROP TRIGGER solo_touch ON solo",
    "DROP TRIGGER events_touch ON events",
    "ALTER TRIGGER solo_touch ON solo RENAME TO solo_touch2",
    "CREATE RULE solo_rule AS ON INSERT TO solo DO ALSO INSERT INTO solo_log VALUES (1)",
    "DROP RULE solo_log_rule ON solo_log",
    "CREATE POLICY solo_p2 ON solo USING (n IN (SELECT id FROM parent))",
    "ALTER POLICY solo_policy ON solo USING (n > 1)",
    "DROP POLICY solo_policy ON solo",
    "CREATE STATISTICS solo_st2 (ndistinct) ON n, t FROM solo",
    "ALTER STATISTICS solo_stats SET STATISTICS 50",
    "DROP STATISTICS solo_stats",
    # sequences
    "CREATE SEQUENCE fresh_seq OWNED BY solo.n",
    "ALTER SEQUENCE loose_seq RESTART WITH 10",
    "ALTER SEQUENCE loose_seq OWNED BY solo.n",
    "ALTER SEQUENCE loose_seq RENAME TO loose_seq2",
    "DROP SEQUENCE loose_seq",
    "SELECT nextval('loose_seq')",
    # types, domains, functions, schemas
    "ALTER DOMAIN positive ADD CONSTRAINT positive_check CHECK (VALUE > 0)",
    "ALTER DOMAIN positive SET NOT NULL",
    "ALTER TYPE mood ADD VALUE 'glad'",
    "ALTER TYPE mood RENAME VALUE 'sad' TO 'blue'",
    "CREATE TYPE pair AS (a int, b int)",
    "CREATE DOMAIN small AS int CHECK (VALUE < 10)",
    "CREATE FUNCTION count_solo() RETURNS bigint LANGUAGE sql AS "
    "'SELECT count(*) FROM solo'",
    "CREATE FUNCTION count_parent() RETURNS bigint LANGUAGE sql "
    "BEGIN ATOMIC SELECT count(*) FROM parent; END",
    "CREATE OR REPLACE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS "
    "$$BEGIN RETURN NEW; END$$",
    "DROP FUNCTION touch() CASCADE",
    "DROP VIEW solo_view",
    "SELECT setval('loose_seq', 5)",
    "SELECT nextval('public.loose_seq'::regclass)",
    "CREATE SCHEMA fresh_schema",
    "DROP SCHEMA scratch CASCADE",
    "ALTER SCHEMA scratch RENAME TO scratch2",
    "CREATE EXTENSION IF NOT EXISTS plpgsql",
    "CREATE PUBLICATION pub_solo FOR TABLE solo",
    "ALTER PUBLICATION pub_empty ADD TABLE solo",
    # DML and queries
    "INSERT INTO child VALUES (100, 1, 'c1', 'x')",
    "UPDATE parent SET id = id",
    "DELETE FROM child WHERE id = 1",
    "DELETE FROM solo_log",
    "MERGE INTO solo s USING parent p ON s.id = p.id WHEN MATCHED THEN UPDATE SET n = 1",
    "SELECT * FROM parent FOR UPDATE",
    "SELECT * FROM child JOIN parent ON parent.id = child.parent_id FOR SHARE OF child",
    "WITH moved AS (DELETE FROM orphan RETURNING *) INSERT INTO orphan SELECT * FROM moved",
    "EXPLAIN SELECT * FROM solo",
    "LOCK TABLE solo IN SHARE ROW EXCLUSIVE MODE",
    "LOCK TABLE solo, child IN ACCESS SHARE MODE",
    "ANALYZE solo",
    "DECLARE oracle_cursor CURSOR FOR SELECT * FROM parent_view",
    "PREPARE oracle_prepared AS SELECT * FROM solo WHERE id = $1",
    "CREATE SCHEMA fresh_schema CREATE TABLE fresh (id int REFERENCES parent (id))",
    "REFRESH MATERIALIZED VIEW CONCURRENTLY solo_mv",
    "ALTER INDEX child_body_idx DEPENDS ON EXTENSION plpgsql",
    "ALTER TABLE events DETACH PARTITION events_2026",
    "CREATE TABLE events_2027 (LIKE events)",
    "SET LOCAL lock_timeout = '1s'",
    "SET CONSTRAINTS ALL DEFERRED",
    "NOTIFY oracle",
    "SELECT 1",
    # writable CTEs: the data change inside WITH writes (issue 39)
    "WITH gone AS (DELETE FROM stock_old RETURNING *) INSERT INTO stock_log SELECT * FROM gone",
    "WITH gone AS (DELETE FROM stock_old WHERE id = 1 RETURNING id) SELECT count(*) FROM gone",
    "WITH moved AS (UPDATE stock SET n = 7 WHERE id = 4 RETURNING id) SELECT * FROM moved",
    # functions and procedures: their bodies run (read from pg_proc)
    "SELECT backfill()",
    "SELECT outer_count()",
    "SELECT countdown(2)",
    "SELECT literal_execute()",
    "CALL prune()",
    "SELECT count(*) FROM stock WHERE n > extract(day FROM now())",
    # triggers: the enabled ones the data change fires, for its events (read from pg_trigger)
    "INSERT INTO stock VALUES (100, 1)",
    "UPDATE stock SET n = 0 WHERE id = 2",
    "DELETE FROM stock WHERE id = 3",
    "INSERT INTO stock VALUES (5, 5) ON CONFLICT (id) DO UPDATE SET n = 0",
    "TRUNCATE stock_old",
    "DO $$ BEGIN PERFORM backfill(); INSERT INTO stock VALUES (101, 1); END $$",
]

# Forms a major before this one cannot parse (skipped there).
SINCE = {
    "ALTER TABLE solo ALTER COLUMN big SET COMPRESSION pglz": 14,
    "ALTER TABLE solo SET ACCESS METHOD heap": 15,
    "CREATE OR REPLACE TRIGGER solo_touch BEFORE UPDATE ON solo "
    "FOR EACH ROW EXECUTE FUNCTION touch()": 14,
    "CREATE FUNCTION count_parent() RETURNS bigint LANGUAGE sql "
    "BEGIN ATOMIC SELECT count(*) FROM parent; END": 14,
    "MERGE INTO solo s USING parent p ON s.id = p.id WHEN MATCHED THEN UPDATE SET n = 1": 15,
    "ALTER TABLE logs DETACH PARTITION logs_2025 CONCURRENTLY": 14,
}

# Forms whose locks depend on the data, not only the catalog: the prediction must cover
# them, and may name more than one run takes.
DEPENDS_ON_DATA = {
    "INSERT INTO events VALUES (3, '2025-06-06', 'z')": "rows are routed to one partition",
    "UPDATE parent SET id = id": "foreign key checks run only when a key changes",
}

# Relations, their kinds and the table whose lock covers theirs (see the module docstring).
_CATALOG = """
SELECT c.oid::int8, n.nspname::text,
       coalesce(i.indrelid, toast.oid, owned.refobjid)::int8
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index i ON i.indexrelid = c.oid
LEFT JOIN pg_class toast ON toast.reltoastrelid = c.oid
LEFT JOIN pg_depend owned ON c.relkind = 'S' AND owned.classid = 'pg_class'::regclass
     AND owned.objid = c.oid AND owned.refclassid = 'pg_class'::regclass
     AND owned.deptype IN ('a', 'i')
"""
_MY_LOCKS = """
SELECT relation::int8, mode FROM pg_locks
WHERE pid = pg_backend_pid() AND locktype = 'relation'
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
_SYSTEM = {"pg_catalog", "information_schema"}
PLAIN_WORDS = re.compile(r"^[A-Z][A-Z ./()&,-]*$")


def _skip_if_too_new(statement: str, pg_version: int) -> None:
    if pg_version < SINCE.get(statement, 0):
        pytest.skip(f"PostgreSQL {pg_version} cannot parse it ({SINCE[statement]}+)")


@pytest.fixture(scope="module")
def oracle(pg_version, pgsteady_postgres_version):
    """One database with the oracle's schema on that major; an autocommit connection and its
    catalog."""
    server = pgsteady_postgres_version(pg_version)
    name = "lock_oracle"
    dsn = server.create_database(name)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SETUP)
            conn.execute("CREATE ROLE oracle_reader")
            catalog = {oid: (schema, owner) for oid, schema, owner in
                       conn.execute(_CATALOG).fetchall()}
            yield conn, catalog
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP ROLE IF EXISTS oracle_reader")  # roles are cluster-wide
        server.drop_database(name)


def test_catalogue_is_large_enough():
    """The oracle covers at least 100 statement forms, none of them twice."""
    assert len(FORMS) >= 100
    assert len(set(FORMS)) == len(FORMS)


@pytest.mark.pg_versions
@pytest.mark.parametrize("statement", FORMS)
def test_prediction_covers_every_lock_taken(oracle, statement, pg_version):
    """Every relation the statement locks is predicted, at a mode at least as strong; no more."""
    _skip_if_too_new(statement, pg_version)
    conn, catalog = oracle
    [info] = analyze(statement, pg_version)
    assert PLAIN_WORDS.match(info.kind), info.kind
    predicted: dict[int, LockMode] = {}
    for locked in relations(conn, _targets(conn, info)):
        known = predicted.get(locked.oid)
        predicted[locked.oid] = locked.lock if known is None else join(known, locked.lock)
    taken = _locks_taken(conn, statement)
    missed = [f"{_name(conn, oid)} {mode} (predicted {_predicted_for(oid, predicted, catalog)})"
              for oid, mode in taken if not _covered(oid, mode, predicted, catalog)]
    assert not missed, f"{statement!r} ({info.kind}) took locks the analysis missed: {missed}"
    if statement in DEPENDS_ON_DATA:
        return
    # And no more: every predicted relation was locked, none at a needlessly strong mode
    # (a false blocker in preflight is a deploy held for nothing).
    held: dict[int, LockMode] = {}
    for oid, mode in taken:
        if oid in catalog and catalog[oid][0] not in _SYSTEM:
            owner = next((c for c in _chain(oid, catalog) if c in predicted), None)
            if owner is not None:
                held[owner] = join(held[owner], mode) if owner in held else mode
    extra = [f"{_name(conn, oid)} {lock} (took {held.get(oid)})"
             for oid, lock in predicted.items()
             if oid not in held or not held[oid].covers(lock)]
    assert not extra, f"{statement!r} ({info.kind}) predicted more than it took: {extra}"


def _targets(conn: psycopg.Connection[Any], info: StatementInfo) -> list[Target]:
    """What preflight claims for the statement: its targets, a DO block's statements', and
    those of the functions it calls and the triggers it fires (none of them unknown)."""
    reading = opaque.read(info) if opaque.needs_reading(info) else opaque.Reading([info])
    assert reading.unknown == []
    follower = Follower(conn)
    targets: list[Target] = []
    for statement in reading.statements:
        followed = follower.follow(statement)
        assert followed.unknown == []
        targets += [t for s in (statement, *followed.statements) for t in s.targets]
    return targets


def _chain(oid: int, catalog: dict[int, tuple[str, int | None]]) -> list[int]:
    """The relation, then the table whose lock covers it (an index's, a TOAST table's...)."""
    covering = [oid]
    owner = catalog[oid][1]
    while owner is not None and owner not in covering:
        covering.append(owner)
        owner = catalog.get(owner, ("", None))[1]
    return covering


def _covered(oid: int, mode: LockMode, predicted: dict[int, LockMode],
             catalog: dict[int, tuple[str, int | None]]) -> bool:
    if oid not in catalog or catalog[oid][0] in _SYSTEM:
        return True  # created by the statement, or a system catalog: ignored
    return any(c in predicted and predicted[c].covers(mode) for c in _chain(oid, catalog))


def _predicted_for(oid: int, predicted: dict[int, LockMode],
                   catalog: dict[int, tuple[str, int | None]]) -> list[str]:
    return [str(predicted[c]) for c in _chain(oid, catalog) if c in predicted]


def _locks_taken(conn: psycopg.Connection[Any], statement: str) -> list[tuple[int, LockMode]]:
    with conn.transaction(force_rollback=True):
        conn.execute(statement)  # type: ignore[arg-type]  # catalogue text
        rows = conn.execute(_MY_LOCKS).fetchall()
    return [(oid, LockMode.from_pg_name(mode)) for oid, mode in rows]


def _name(conn: psycopg.Connection[Any], oid: int) -> str:
    row = conn.execute("SELECT %s::oid::regclass::text", [oid]).fetchone()
    return row[0] if row else str(oid)


# Statements that cannot run in a transaction are caught while they wait: another session
# holds a lock they must wait for, and their locks (held and asked for) are read meanwhile.
CONCURRENT_FORMS = [
    ("CREATE INDEX CONCURRENTLY solo_t_idx ON solo (t)", "LOCK TABLE solo IN ROW EXCLUSIVE MODE"),
    ("REINDEX INDEX CONCURRENTLY child_body_idx", "LOCK TABLE child IN ROW EXCLUSIVE MODE"),
    ("REINDEX TABLE CONCURRENTLY child", "LOCK TABLE child IN ROW EXCLUSIVE MODE"),
    ("DROP INDEX CONCURRENTLY child_body_idx", "SELECT count(*) FROM child"),
    ("ALTER TABLE logs DETACH PARTITION logs_2025 CONCURRENTLY", "SELECT count(*) FROM logs"),
    ("VACUUM solo", "LOCK TABLE solo IN SHARE UPDATE EXCLUSIVE MODE"),
    ("VACUUM FULL solo", "SELECT count(*) FROM solo"),
    ("CLUSTER solo USING solo_pkey", "SELECT count(*) FROM solo"),
]
_LOCKS_OF = """
SELECT relation::int8, mode, granted FROM pg_locks
WHERE pid = %s AND locktype = 'relation'
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
_WAITING = "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted"


@pytest.mark.pg_versions
@pytest.mark.parametrize(("statement", "holder_sql"), CONCURRENT_FORMS)
def test_prediction_covers_statements_outside_transactions(pgsteady_version_database,
                                                            statement, holder_sql, pg_version):
    """CREATE INDEX CONCURRENTLY & co., seen mid-wait, lock nothing the analysis missed."""
    import threading
    import time

    _skip_if_too_new(statement, pg_version)
    dsn = pgsteady_version_database.dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SETUP)
        catalog = {oid: (schema, owner) for oid, schema, owner in
                   conn.execute(_CATALOG).fetchall()}
        [info] = analyze(statement, pg_version)
        predicted = {locked.oid: locked.lock for locked in relations(conn, info.targets)}
        holder = psycopg.connect(dsn)
        runner = psycopg.connect(dsn, autocommit=True)
        try:
            holder.execute(holder_sql)  # type: ignore[arg-type]
            runner.execute("SET lock_timeout = '10s'")
            thread = threading.Thread(target=lambda: runner.execute(statement), daemon=True)
            thread.start()
            pid = runner.info.backend_pid
            deadline = time.monotonic() + 10
            while conn.execute(_WAITING, [pid]).fetchone()[0] == 0:
                assert time.monotonic() < deadline, f"{statement} never waited"
                time.sleep(0.02)
            taken = conn.execute(_LOCKS_OF, [pid]).fetchall()
            holder.rollback()
            thread.join(15)
        finally:
            holder.close()
            runner.close()
    missed = [f"oid {oid} {mode} ({'held' if granted else 'asked for'})"
              for oid, mode, granted in taken
              if not _covered(oid, LockMode.from_pg_name(mode), predicted, catalog)]
    # DETACH PARTITION CONCURRENTLY waits for old transactions holding no relation lock.
    assert not missed, f"{statement!r} ({info.kind}) missed: {missed}"
