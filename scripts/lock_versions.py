"""Print the lock oracle's statement forms x PostgreSQL majors: the locks each form takes,
read from ``pg_locks`` on every installed major, for the forms where majors differ.

    PYTHONPATH=src .venv/bin/python scripts/lock_versions.py [--all] [MAJOR ...]

The forms and the schema are the lock-oracle test's (tests/migrate/test_lock_oracle.py);
majors come from scripts/postgres-versions.sh (default: every one installed). A cell is the
locks on user relations, strongest per relation, indexes folded into their table; "-" is no
lock, "n/a" a form that major cannot run. Not a test: the test holds the analysis to these.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "migrate"))
import test_lock_oracle as oracle  # noqa: E402

from pgsteady.lab import _process  # noqa: E402
from pgsteady.lab.cluster import Postgres, make_workdir, remove_tree  # noqa: E402
from pgsteady.sql.locks import LockMode, join  # noqa: E402

_SHORT = {"ACCESS SHARE": "AS", "ROW SHARE": "RS", "ROW EXCLUSIVE": "RE",
          "SHARE UPDATE EXCLUSIVE": "SUE", "SHARE": "S", "SHARE ROW EXCLUSIVE": "SRE",
          "EXCLUSIVE": "E", "ACCESS EXCLUSIVE": "AE"}


def _locks(conn: psycopg.Connection[Any], form: str, names: dict[int, str],
           owners: dict[int, int | None]) -> str:
    with conn.transaction(force_rollback=True):
        conn.execute(form)  # type: ignore[arg-type]
        rows = conn.execute(oracle._MY_LOCKS).fetchall()
    held: dict[str, LockMode] = {}
    for oid, mode in rows:
        if oid not in names or names[oid].startswith("pg_"):
            continue
        table = names[owners.get(oid) or oid] if owners.get(oid) in names else names[oid]
        lock = LockMode.from_pg_name(mode)
        held[table] = join(held[table], lock) if table in held else lock
    return " ".join(f"{t}:{_SHORT[m.value]}" for t, m in sorted(held.items())) or "-"


def run(major: int) -> dict[str, str]:
    who = _process.run_as()
    server = Postgres(make_workdir(None, who, prefix=f"pgsteady-locks{major}-"), who=who,
                      pg_version=major)
    cells: dict[str, str] = {}
    try:
        server.start()
        with psycopg.connect(server.create_database("oracle"), autocommit=True) as conn:
            conn.execute("CREATE ROLE oracle_reader")
            for statement in oracle.SETUP.strip().rstrip(";").split(";\n"):
                try:  # an older major lacks some of the schema: its forms then fail
                    conn.execute(statement)  # type: ignore[arg-type]
                except psycopg.Error:
                    pass
            catalog = conn.execute(oracle._CATALOG).fetchall()
            names = dict(conn.execute(
                "SELECT oid::int8, oid::regclass::text FROM pg_class").fetchall())
            owners = {oid: owner for oid, _, owner in catalog}
            for form in oracle.FORMS:
                try:
                    cells[form] = _locks(conn, form, names, owners)
                except psycopg.Error:
                    cells[form] = "n/a"
    finally:
        server.stop()
        remove_tree(server.workdir)
    return cells


def main(argv: list[str]) -> int:
    show_all = "--all" in argv
    majors = [int(a) for a in argv if a.isdigit()] or list(_process.installed_pg_versions())
    table = {major: run(major) for major in majors}
    differing = 0
    for form in oracle.FORMS:
        cells = [table[m][form] for m in majors]
        if len(set(cells)) == 1 and not show_all:
            continue
        differing += len(set(cells)) > 1
        print(form)
        start = 0
        for i in range(1, len(majors) + 1):  # runs of majors with the same cell
            if i == len(majors) or cells[i] != cells[start]:
                span = f"{majors[start]}" if i - 1 == start else f"{majors[start]}-{majors[i - 1]}"
                print(f"    {span:>6}  {cells[start]}")
                start = i
    print(f"\n{differing} of {len(oracle.FORMS)} forms differ among PostgreSQL "
          f"{', '.join(map(str, majors))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
