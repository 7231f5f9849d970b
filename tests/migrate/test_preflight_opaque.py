"""Issue 27 item 6: preflight reads what a DO block runs, and never says ok for a statement
whose locks it cannot know (a computed EXECUTE, a CALL, a function it does not read)."""

from __future__ import annotations

import json

import pytest
from migrate_helpers import FAST, run_cli, write_migrations

from pgsteady.errors import MigrationBlocked
from pgsteady.migrate import apply, source
from pgsteady.sql.analysis import analyze
from pgsteady.sql.opaque import read


def _preflight(db, folder, *extra):
    result = run_cli("preflight", "--dsn", db, "--dir", str(folder), "--blocker-age", "0",
                     *extra)
    return result


def test_do_execute_of_a_literal_names_the_holder(db, orgs_dir, pgsteady_lock_holder):
    """EXECUTE 'ALTER TABLE orgs ...' inside DO: the session reading orgs is named, exit 1."""
    write_migrations(orgs_dir, {"0002_flag.sql": """
        DO $$
        BEGIN
          EXECUTE 'ALTER TABLE orgs ADD COLUMN flag boolean';
        END $$;
    """})
    holder = pgsteady_lock_holder(db, "orgs", select=True, application_name="dashboard")
    result = _preflight(db, orgs_dir)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "preflight refused: 1 session(s)" in result.stdout
    assert f"pid {holder.pid} 'dashboard'" in result.stdout
    assert "0002_flag.sql:3 ALTER TABLE ... ADD COLUMN in DO needs ACCESS EXCLUSIVE" \
        in result.stdout
    assert "preflight ok" not in result.stdout


def test_do_static_update_names_the_holder(db, orgs_dir, pgsteady_lock_holder):
    """A static UPDATE inside DO needs ROW EXCLUSIVE: a SHARE holder is named in --json."""
    write_migrations(orgs_dir, {"0002_fill.sql": """
        DO $$
        DECLARE n int;
        BEGIN
          SELECT count(*) INTO n FROM orgs;
          UPDATE orgs SET name = upper(name) WHERE id > n - 10;
        END $$;
    """})
    holder = pgsteady_lock_holder(db, "orgs", "SHARE", application_name="nightly-copy")
    result = _preflight(db, orgs_dir, "--json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["unknown"] == []
    [blocker] = data["blockers"]
    assert blocker["pid"] == holder.pid
    assert blocker["needed_by"]["where"].endswith("0002_fill.sql:5")
    assert blocker["needed_by"]["lock"] == "ROW EXCLUSIVE"


def test_do_dynamic_execute_is_unknown(db, orgs_dir):
    """EXECUTE of a variable: not ok, exit 1, file:line and why; --allow-unknown accepts it."""
    write_migrations(orgs_dir, {"0002_dyn.sql": """
        DO $$
        DECLARE target text := 'orgs';
        BEGIN
          EXECUTE 'ALTER TABLE ' || quote_ident(target) || ' ADD COLUMN flag boolean';
        END $$;
    """})
    result = _preflight(db, orgs_dir)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "preflight cannot say ok for 1 pending migration(s)" in result.stdout
    assert "0002_dyn.sql:4 DO: EXECUTE of a string computed when it runs" in result.stdout
    data = json.loads(_preflight(db, orgs_dir, "--json").stdout)
    assert data["ok"] is False and data["blockers"] == []
    [unknown] = data["unknown"]
    assert unknown["file"].endswith("0002_dyn.sql") and unknown["line"] == 4
    assert unknown["kind"] == "DO"
    accepted = _preflight(db, orgs_dir, "--allow-unknown")
    assert accepted.returncode == 0, accepted.stdout
    assert "preflight ok" in accepted.stdout
    assert "--allow-unknown accepted the unknown locks of 1 statement(s)" in accepted.stdout


def test_do_touching_nothing_locked_is_ok(db, orgs_dir, pgsteady_lock_holder):
    """A DO block whose statements are all known and meet no holder: exit 0, nothing unknown."""
    write_migrations(orgs_dir, {"0002_side.sql": """
        CREATE TABLE audit (id int);
        DO $$
        BEGIN
          IF NOT EXISTS (SELECT 1 FROM audit) THEN
            INSERT INTO audit VALUES (1);
            EXECUTE format('ALTER TABLE %I ADD COLUMN %s text', 'audit', 'note');
            PERFORM pg_sleep(0);
          END IF;
        END $$;
    """})
    pgsteady_lock_holder(db, "orgs", select=True)  # someone holds a lock, elsewhere
    result = _preflight(db, orgs_dir, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["blockers"] == [] and data["unknown"] == []


@pytest.mark.parametrize(("statement", "kind", "why"), [
    ("CALL refresh_orgs()", "CALL", "procedure whose body"),
    ("DROP OWNED BY CURRENT_USER", "DROP OWNED", "whatever a role owns"),
    ("REINDEX SCHEMA public", "REINDEX SCHEMA", "every table in the schema"),
    ("DO $$ BEGIN PERFORM refresh_all(); END $$", "DO", "calls refresh_all()"),
    ("DO LANGUAGE plpython3u $$ pass $$", "DO", "in language plpython3u"),
    ("DO $$ BEGIN EXECUTE 'CALL refresh_orgs()'; END $$", "DO", "CALL runs a procedure"),
])
def test_statements_whose_locks_are_unknown(db, orgs_dir, statement, kind, why):
    """Each statement kind the oracle cannot see through is listed as unknown, with why."""
    write_migrations(orgs_dir, {"0002_x.sql": f"-- pgsteady: no-transaction\n{statement};\n"})
    report = apply.run_preflight(db, source.load_dir(orgs_dir), FAST)
    [unknown] = report.unknown
    assert (unknown.line, unknown.kind) == (2, kind)
    assert why in unknown.why
    assert report.ok and not report.clear


def test_vacuum_without_a_table_is_unknown(db, orgs_dir):
    """VACUUM with no table works through all of them: unknown; VACUUM orgs is known."""
    write_migrations(orgs_dir, {"0002_vacuum.sql": "-- pgsteady: no-transaction\nVACUUM;\n",
                                "0003_vacuum.sql": "-- pgsteady: no-transaction\n"
                                                   "VACUUM orgs;\n"})
    report = apply.run_preflight(db, source.load_dir(orgs_dir), FAST)
    assert [(u.file.rsplit("/", 1)[-1], u.kind) for u in report.unknown] == [
        ("0002_vacuum.sql", "VACUUM")]


def test_migrate_preflight_refuses_a_blocked_do(db, orgs_dir, pgsteady_lock_holder):
    """migrate's own preflight now sees the ALTER inside a DO and names its blocker."""
    write_migrations(orgs_dir, {"0002_flag.sql": "DO $$ BEGIN EXECUTE 'ALTER TABLE orgs "
                                                 "ADD COLUMN flag boolean'; END $$;\n"})
    holder = pgsteady_lock_holder(db, "orgs", select=True, application_name="reader")
    with pytest.raises(MigrationBlocked) as err:
        apply.migrate(db, source.load_dir(orgs_dir), FAST)
    message = str(err.value)
    assert message.startswith("preflight: 1 session(s) would block")  # before any try
    assert f"pid {holder.pid} 'reader'" in message


@pytest.mark.parametrize(("expression", "table"), [
    ("'ALTER TABLE t ADD c int'", "t"),
    ("'ALTER TABLE ' || 'u' || ' ADD c int'", "u"),
    ("format('ALTER TABLE %I.%I ADD %s int', 's', 'Odd', 'c')", "Odd"),
    ("format('TRUNCATE %2$s, %1$s', 'a', 'b')", "b"),
    ("'LOCK ' || quote_ident('v')", "v"),
    ("concat('DROP TABLE ', 'w')::text", "w"),
])
def test_literal_execute_strings_are_read(expression, table):
    """EXECUTE strings built from literals alone go through the lock oracle."""
    [statement] = analyze(f"DO $$ BEGIN EXECUTE {expression}; END $$")
    reading = read(statement)
    assert reading.unknown == []
    assert table in {t.name for s in reading.statements for t in s.targets}


def test_plan_reads_a_do_block_as_preflight_does(db, orgs_dir):
    """--plan shows a DO block's statements and locks, and says why the rest is unknown,
    instead of calling the whole block unknown (issue 39)."""
    write_migrations(orgs_dir, {"0002_flag.sql": """
        DO $$
        DECLARE t text := 'orgs';
        BEGIN
          EXECUTE 'ALTER TABLE orgs ADD COLUMN flag boolean';
          UPDATE orgs SET name = upper(name);
          EXECUTE 'ANALYZE ' || t;
        END $$;
    """})
    result = run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir), "--plan")
    assert result.returncode == 0, result.stderr
    assert "line 4: ALTER TABLE ... ADD COLUMN in DO: ACCESS EXCLUSIVE on orgs" \
        in result.stdout
    assert "line 5: UPDATE in DO: ROW EXCLUSIVE on orgs" in result.stdout
    assert "line 6: DO: cannot be known: EXECUTE of a string computed when it runs" \
        in result.stdout
    assert "what it locks cannot be known from its text" not in result.stdout
    data = json.loads(run_cli("migrate", "--dsn", db, "--dir", str(orgs_dir), "--plan",
                              "--json").stdout)
    [do] = data["plan"][0]["statements"]
    assert [(s["line"], s["kind"]) for s in do["inner"]] == [
        (2, "SELECT in DO"), (4, "ALTER TABLE ... ADD COLUMN in DO"), (5, "UPDATE in DO")]
    assert [u["line"] for u in do["unknown"]] == [6]
