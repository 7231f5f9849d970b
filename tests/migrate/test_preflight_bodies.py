"""Issue 39 items 1-3: preflight reads what runs inside a statement (a function's body, the
triggers a data change fires, a data change inside WITH) and names who is in its way; what it
cannot read is listed by file:line and why, never "ok"."""

from __future__ import annotations

import json

import psycopg
import pytest
from migrate_helpers import FAST, run_cli, write_migrations

from pgsteady.migrate import apply, source


def _preflight(db, folder, *extra):
    return run_cli("preflight", "--dsn", db, "--dir", str(folder), "--blocker-age", "0", *extra)


def _setup(db, sql):
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(sql)


BACKFILL = """
CREATE FUNCTION backfill() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  ALTER TABLE orgs ADD COLUMN plan text;
  UPDATE orgs SET plan = 'free';
END $$;
"""


def test_select_of_a_function_that_alters_a_read_table_is_refused(db, orgs_dir,
                                                                  pgsteady_lock_holder):
    """SELECT backfill() whose body ALTERs orgs: the session reading orgs is named, exit 1
    (quickwit: preflight said ok)."""
    _setup(db, BACKFILL)
    write_migrations(orgs_dir, {"0002_backfill.sql": "SELECT 1;\nSELECT backfill();\n"})
    holder = pgsteady_lock_holder(db, "orgs", select=True, application_name="dashboard")
    result = _preflight(db, orgs_dir)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "preflight refused: 1 session(s)" in result.stdout
    assert f"pid {holder.pid} 'dashboard'" in result.stdout
    assert "0002_backfill.sql:2 ALTER TABLE ... ADD COLUMN in public.backfill() needs " \
           "ACCESS EXCLUSIVE" in result.stdout
    assert "preflight ok" not in result.stdout


def test_function_created_in_a_pending_migration_is_read_from_its_text(db, orgs_dir,
                                                                       pgsteady_lock_holder):
    """A function an earlier pending migration creates (not in pg_proc yet) is read from the
    migration's text; a later definition replaces an earlier one."""
    write_migrations(orgs_dir, {
        "0002_fn.sql": "CREATE FUNCTION backfill() RETURNS void LANGUAGE sql "
                       "AS 'SELECT 1';\n"
                       + BACKFILL.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"),
        "0003_run.sql": "SELECT backfill();\n"})
    holder = pgsteady_lock_holder(db, "orgs", select=True)
    data = json.loads(_preflight(db, orgs_dir, "--json").stdout)
    assert data["unknown"] == []
    [blocker] = data["blockers"]
    assert blocker["pid"] == holder.pid
    assert blocker["needed_by"]["where"].endswith("0003_run.sql:1")
    assert blocker["needed_by"]["kind"] == "ALTER TABLE ... ADD COLUMN in backfill()"


TRIGGER = """
CREATE TABLE posts (id int PRIMARY KEY, org int);
CREATE MATERIALIZED VIEW post_counts AS SELECT org, count(*) AS n FROM posts GROUP BY org;
CREATE FUNCTION posts_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  REFRESH MATERIALIZED VIEW post_counts;
  RETURN NULL;
END $$;
CREATE TRIGGER posts_changed AFTER INSERT OR DELETE ON posts
    FOR EACH STATEMENT EXECUTE FUNCTION posts_changed();
"""


def test_trigger_fired_by_an_insert_is_read(db, orgs_dir, pgsteady_lock_holder):
    """INSERT INTO posts fires a trigger whose function refreshes a materialized view: the
    session reading the view is named (lemmy 0033: EXCLUSIVE on three views, unclaimed)."""
    _setup(db, TRIGGER)
    write_migrations(orgs_dir, {"0002_seed.sql": "INSERT INTO posts VALUES (1, 1);\n"})
    holder = pgsteady_lock_holder(db, "post_counts", select=True, application_name="stats")
    result = _preflight(db, orgs_dir)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"pid {holder.pid} 'stats'" in result.stdout
    assert "0002_seed.sql:1 REFRESH MATERIALIZED VIEW in public.posts_changed() needs " \
           "ACCESS EXCLUSIVE" in result.stdout


def test_trigger_for_other_events_or_disabled_is_not_claimed(db, orgs_dir,
                                                             pgsteady_lock_holder):
    """An UPDATE does not fire an INSERT/DELETE trigger, and a disabled trigger fires for
    nothing: no false blocker, exit 0."""
    _setup(db, TRIGGER + "CREATE TABLE other (id int);\n"
                         "CREATE TRIGGER other_changed AFTER INSERT ON other "
                         "FOR EACH STATEMENT EXECUTE FUNCTION posts_changed();\n"
                         "ALTER TABLE other DISABLE TRIGGER other_changed;\n")
    write_migrations(orgs_dir, {"0002_fix.sql": "UPDATE posts SET org = 2;\n"
                                                "INSERT INTO other VALUES (1);\n"})
    pgsteady_lock_holder(db, "post_counts", select=True)
    result = _preflight(db, orgs_dir, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["blockers"] == []


def test_trigger_created_in_a_pending_migration_is_read(db, orgs_dir, pgsteady_lock_holder):
    """A trigger created earlier in the pending migrations fires on a later INSERT."""
    _setup(db, "CREATE TABLE audit (id int);")
    write_migrations(orgs_dir, {
        "0002_trigger.sql": """
            CREATE FUNCTION orgs_audit() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN LOCK TABLE audit IN SHARE MODE; RETURN NEW; END $$;
            CREATE TRIGGER orgs_audit BEFORE INSERT ON orgs
                FOR EACH ROW EXECUTE FUNCTION orgs_audit();
        """,
        "0003_seed.sql": "INSERT INTO orgs VALUES (1000, 'x');\n"})
    holder = pgsteady_lock_holder(db, "audit", "ROW EXCLUSIVE")
    data = json.loads(_preflight(db, orgs_dir, "--json").stdout)
    [blocker] = data["blockers"]
    assert blocker["pid"] == holder.pid
    assert blocker["needed_by"]["where"].endswith("0003_seed.sql:1")
    assert blocker["needed_by"]["lock"] == "SHARE"


def test_writable_cte_is_a_write(db, orgs_dir, pgsteady_lock_holder):
    """WITH d AS (DELETE FROM orgs ...) INSERT INTO b ...: ROW EXCLUSIVE on orgs, so a SHARE
    holder of orgs is named (it was read as ACCESS SHARE: Mattermost 000105, lemmy 0288)."""
    write_migrations(orgs_dir, {"0002_move.sql": """
        CREATE TABLE old_orgs (id int, name text);
        WITH gone AS (DELETE FROM orgs WHERE id > 90 RETURNING id, name)
        INSERT INTO old_orgs SELECT * FROM gone;
    """})
    holder = pgsteady_lock_holder(db, "orgs", "SHARE", application_name="nightly-copy")
    data = json.loads(_preflight(db, orgs_dir, "--json").stdout)
    [blocker] = data["blockers"]
    assert blocker["pid"] == holder.pid
    assert blocker["needed_by"]["where"].endswith("0002_move.sql:2")
    assert blocker["needed_by"]["lock"] == "ROW EXCLUSIVE"


@pytest.mark.parametrize(("setup", "statement", "why"), [
    ("CREATE FUNCTION my_len(text) RETURNS int LANGUAGE internal AS 'textlen'",
     "SELECT my_len(name) FROM orgs", "calls my_len(): public.my_len() is written in internal"),
    ("CREATE FUNCTION touch_all(t text) RETURNS void LANGUAGE plpgsql AS $$ BEGIN "
     "EXECUTE 'ALTER TABLE ' || t || ' ADD COLUMN x int'; END $$",
     "SELECT touch_all('orgs')",
     "calls touch_all(): public.touch_all() EXECUTE of a string computed when it runs"),
    ("CREATE FUNCTION unrelated() RETURNS int LANGUAGE sql AS 'SELECT 1'",
     "SELECT no_such_function()",
     "calls no_such_function(): a function whose body preflight cannot find"),
    ("CREATE TABLE t (id int); CREATE FUNCTION t_log() RETURNS trigger LANGUAGE plpgsql AS "
     "$$ BEGIN EXECUTE TG_ARGV[0]; RETURN NEW; END $$; CREATE TRIGGER t_log AFTER INSERT ON t "
     "FOR EACH ROW EXECUTE FUNCTION t_log('x')",
     "INSERT INTO t VALUES (1)",
     "fires trigger t_log on t: public.t_log() EXECUTE of a string computed when it runs"),
])
def test_what_cannot_be_read_is_unknown(db, orgs_dir, setup, statement, why):
    """A function written in C, a dynamic EXECUTE in a body (or a trigger's), a function
    found nowhere: listed by file:line and why, exit 1, never ok."""
    _setup(db, setup)
    write_migrations(orgs_dir, {"0002_x.sql": f"SELECT 1;\n{statement};\n"})
    result = _preflight(db, orgs_dir)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "preflight ok" not in result.stdout
    report = apply.run_preflight(db, source.load_dir(orgs_dir), FAST)
    [unknown] = report.unknown
    assert unknown.line == 2
    assert why in unknown.why, unknown.why
    assert f"0002_x.sql:2 {unknown.kind}: {why}" in result.stdout


def test_functions_calling_each_other_end(db, orgs_dir, pgsteady_lock_holder):
    """A cycle of functions is read once each: a deep one still names its blocker."""
    _setup(db, """
        CREATE FUNCTION ping(n int) RETURNS int LANGUAGE sql AS 'SELECT 0';
        CREATE FUNCTION pong(n int) RETURNS int LANGUAGE plpgsql AS $$
        BEGIN IF n > 0 THEN RETURN ping(n - 1); END IF; TRUNCATE orgs; RETURN 0; END $$;
        CREATE OR REPLACE FUNCTION ping(n int) RETURNS int LANGUAGE sql AS 'SELECT pong(n)';
    """)
    write_migrations(orgs_dir, {"0002_x.sql": "SELECT ping(3);\n"})
    holder = pgsteady_lock_holder(db, "orgs", select=True)
    data = json.loads(_preflight(db, orgs_dir, "--json").stdout)
    assert data["unknown"] == []
    [blocker] = data["blockers"]
    assert blocker["pid"] == holder.pid
    assert blocker["needed_by"]["kind"] == "TRUNCATE in public.pong()"


def test_extension_and_builtin_functions_are_not_unknown(db, orgs_dir):
    """PostgreSQL's own functions (EXTRACT's too) and a C function an extension brought lock
    no table of ours: preflight ok, nothing unknown."""
    _setup(db, "CREATE EXTENSION IF NOT EXISTS pgcrypto")
    write_migrations(orgs_dir, {"0002_x.sql": """
        UPDATE orgs SET name = encode(digest(name, 'sha256'), 'hex')
        WHERE extract(day FROM now()) > 0 AND length(name) > 1;
        DO $$ BEGIN PERFORM extract(epoch FROM now()); END $$;
    """})
    result = _preflight(db, orgs_dir, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["unknown"] == []


@pytest.mark.pg_versions(13)
def test_extract_in_a_do_block_is_known_on_13(pgsteady_version_database, tmp_path):
    """PostgreSQL 13 has no extract() in pg_catalog (EXTRACT is date_part there): a DO block
    using it is still fully known."""
    dsn = pgsteady_version_database.dsn
    folder = write_migrations(tmp_path / "m", {"0001_x.sql": """
        CREATE TABLE t (at timestamptz);
        DO $$ BEGIN
          IF extract(year FROM now()) > 2000 THEN INSERT INTO t VALUES (now()); END IF;
        END $$;
    """})
    report = apply.run_preflight(dsn, source.load_dir(folder), FAST)
    assert report.unknown == []
    assert report.clear


def test_a_function_replaced_in_the_pending_text_is_read_from_it(db, orgs_dir):
    """CREATE OR REPLACE of a function whose catalog body EXECUTEs a computed string: the
    pending body is the one that runs, so nothing is unknown."""
    _setup(db, "CREATE FUNCTION fix() RETURNS void LANGUAGE plpgsql AS $$ BEGIN "
               "EXECUTE 'TRUNCATE ' || current_user; END $$")
    write_migrations(orgs_dir, {"0002_fix.sql": """
        CREATE OR REPLACE FUNCTION fix() RETURNS void LANGUAGE sql AS 'SELECT 1';
        SELECT fix();
    """})
    result = _preflight(db, orgs_dir, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["unknown"] == []


def test_many_statements_firing_one_trigger_read_it_once(db, orgs_dir, pgsteady_lock_holder):
    """300 INSERTs firing the same trigger stay within the bound on bodies read (each body is
    read once), and every one of them is still checked."""
    _setup(db, TRIGGER)
    inserts = "".join(f"INSERT INTO posts VALUES ({n}, 1);\n" for n in range(300))
    write_migrations(orgs_dir, {"0002_seed.sql": inserts})
    pgsteady_lock_holder(db, "post_counts", select=True)
    data = json.loads(_preflight(db, orgs_dir, "--json").stdout)
    assert data["unknown"] == []
    [blocker] = data["blockers"]
    assert blocker["needed_by"]["where"].endswith("0002_seed.sql:1")


def test_migrate_preflight_refuses_a_blocked_function_call(db, orgs_dir, pgsteady_lock_holder):
    """migrate's own preflight sees the ALTER inside backfill() and refuses before any try."""
    from pgsteady.errors import MigrationBlocked

    _setup(db, BACKFILL)
    write_migrations(orgs_dir, {"0002_backfill.sql": "SELECT backfill();\n"})
    holder = pgsteady_lock_holder(db, "orgs", select=True, application_name="reader")
    with pytest.raises(MigrationBlocked) as err:
        apply.migrate(db, source.load_dir(orgs_dir), FAST)
    message = str(err.value)
    assert message.startswith("preflight: 1 session(s) would block")
    assert f"pid {holder.pid} 'reader'" in message
    assert "ALTER TABLE ... ADD COLUMN in public.backfill() needs ACCESS EXCLUSIVE" in message


def test_functions_nested_too_deep_are_unknown(db, orgs_dir):
    """A chain of functions deeper than the bound is listed as unknown, not ok."""
    chain = "".join(f"CREATE FUNCTION f{n}() RETURNS int LANGUAGE sql AS 'SELECT f{n + 1}()';\n"
                    for n in range(10, 0, -1))
    _setup(db, "CREATE FUNCTION f11() RETURNS int LANGUAGE sql AS 'SELECT 1';\n" + chain)
    write_migrations(orgs_dir, {"0002_x.sql": "SELECT f1();\n"})
    report = apply.run_preflight(db, source.load_dir(orgs_dir), FAST)
    [unknown] = report.unknown
    assert unknown.line == 1
    assert unknown.why.startswith("calls f1(), which calls f2(), which calls f3()")
    assert unknown.why.endswith("deeper than 8 functions are not followed")
