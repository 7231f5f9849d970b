"""How fast is ``pgsteady migrate``? 300 plain-SQL migrations against one psql session.

Starts a throwaway PostgreSQL (``pgsteady.lab.cluster.Postgres``), writes N migration files
(default 300: tables, columns, indexes, constraints, small backfills, comments), then applies
the same folder to two fresh databases:

- ``pgsteady migrate --dir ...`` as a whole process (interpreter start, loading and checking
  every file, the preflight, one transaction per migration with its timeouts and history row);
- one ``psql`` session running every file in its own transaction (``BEGIN; \\i file; COMMIT;``),
  the fastest way a team applies a folder by hand (no history, no timeouts, no checks).

Prints both wall times (best of --repeat) and the ratio (goal: within 1.5x). Then loads one
generated file of --load-mb megabytes with ``source.load_dir`` and prints the time and the
peak memory (issue 9 item 7: it was quadratic; 20 MB never finished).

    python bench/migrate_speed.py [--migrations 300] [--repeat 3] [--load-mb 20]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pgsteady.lab import _process
from pgsteady.lab.cluster import Postgres, make_workdir
from pgsteady.migrate import apply, source

TEMPLATES = [
    "CREATE TABLE t{i} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now());\n"
    "INSERT INTO t{i} (name) SELECT 'row ' || g FROM generate_series(1, 20) g;\n",
    "ALTER TABLE t{p} ADD COLUMN c{i} integer;\nCOMMENT ON COLUMN t{p}.c{i} IS 'release {i}';\n",
    "CREATE INDEX t{p}_name_{i} ON t{p} (name);\n",
    "ALTER TABLE t{p} ADD CONSTRAINT t{p}_name_{i} CHECK (name <> '') NOT VALID;\n"
    "ALTER TABLE t{p} VALIDATE CONSTRAINT t{p}_name_{i};\n",
    "UPDATE t{p} SET name = name || '.' WHERE id <= 10;\n",
    "CREATE VIEW v{i} AS SELECT id, name FROM t{p};\n",
]


def write_folder(folder: Path, count: int) -> None:
    """``count`` migrations; every fourth creates a table the next ones change."""
    folder.mkdir(parents=True)
    table = 0
    for i in range(count):
        if i % 4 == 0:
            body, table = TEMPLATES[0].format(i=i), i
        else:
            body = TEMPLATES[1 + i % (len(TEMPLATES) - 1)].format(i=i, p=table)
        (folder / f"{i + 1:04d}_step_{i}.sql").write_text(body)


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({done.returncode}): {done.stderr.strip()}")
    return seconds


def psql_script(folder: Path) -> str:
    return "".join(f"BEGIN;\n\\i {path}\nCOMMIT;\n" for path in sorted(folder.glob("*.sql")))


def load_big_file(megabytes: int) -> None:
    """Time and memory of loading one big file, in a child so its peak RSS is its own."""
    code = f"""
import resource, sys, tempfile, time
from pathlib import Path
from pgsteady.migrate import source
row = "INSERT INTO t (id, name, note) VALUES (1, 'some name', 'a note; with a semicolon');\\n"
folder = Path(tempfile.mkdtemp())
text = "CREATE TABLE t (id int, name text, note text);\\n" + row * ({megabytes} * 2**20 // len(row))
(folder / "0001_big.sql").write_text(text)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
[m] = source.load_dir(folder)
took = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{{len(text) / 2**20:.1f}} MB, {{len(m.statements)}} statements: loaded in {{took:.1f}} s "
      f"({{len(text) / 2**20 / took:.2f}} MB/s); peak RSS {{peak // 1024}} MB "
      f"({{(peak - before) // 1024}} MB above the {{before // 1024}} MB before loading)")
(folder / "0001_big.sql").unlink(); folder.rmdir()
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=900)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--migrations", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--load-mb", type=int, default=20, help="0 to skip the big file")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pgsteady-bench-migrate-"))
    try:
        folder = workdir / "migrations"
        write_folder(folder, args.migrations)
        script = workdir / "all.sql"
        script.write_text(psql_script(folder))
        who = _process.run_as()
        pg_dir = make_workdir(None, who, prefix="pgsteady-bench-pg-")
        server = Postgres(pg_dir, who=who).start()
        try:
            psql = str(server.binaries.pg_bindir / "psql")
            ours: list[float] = []
            inside: list[float] = []
            theirs: list[float] = []
            for run in range(args.repeat):
                dsn = server.create_database(f"bench_inside_{run}")
                start = time.perf_counter()
                apply.migrate(dsn, source.load_dir(folder))
                inside.append(time.perf_counter() - start)
                for who, times in (("pgsteady", ours), ("psql", theirs)):
                    dsn = server.create_database(f"bench_{who.replace('-', '_')}_{run}")
                    if who == "pgsteady":
                        times.append(timed([sys.executable, "-m", "pgsteady", "migrate",
                                            "--dsn", dsn, "--dir", str(folder)]))
                    else:
                        times.append(timed([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1",
                                            "-d", dsn, "-f", str(script)]))
            best_ours, best_theirs = min(ours), min(theirs)
            print(f"{args.migrations} migrations, best of {args.repeat} (2 shared cores: "
                  f"absolute figures are pessimistic, the ratio is the figure)")
            print(f"  pgsteady migrate (whole process): {best_ours:.2f} s "
                  f"(runs: {', '.join(f'{t:.2f}' for t in ours)})")
            print(f"  pgsteady in-process (load_dir + apply.migrate, no interpreter start): "
                  f"{min(inside):.2f} s (runs: {', '.join(f'{t:.2f}' for t in inside)})")
            print(f"  one psql session, a transaction per file: {best_theirs:.2f} s "
                  f"(runs: {', '.join(f'{t:.2f}' for t in theirs)})")
            print(f"  ratio pgsteady/psql: {best_ours / best_theirs:.2f}x whole process, "
                  f"{min(inside) / best_theirs:.2f}x in-process (goal <= 1.5x)")
        finally:
            server.stop()
            shutil.rmtree(pg_dir, ignore_errors=True)
        if args.load_mb:
            load_big_file(args.load_mb)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
