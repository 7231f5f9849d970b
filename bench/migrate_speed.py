"""How fast is ``pgsteady migrate``? 300 plain-SQL migrations against one psql session.

Starts a throwaway PostgreSQL (``pgsteady.lab.cluster.Postgres``), writes N migration files
(default 300: tables, columns, indexes, constraints, small backfills, comments), then applies
the same folder to two fresh databases:

- ``pgsteady migrate --dir ...`` as a whole process (interpreter start, loading and checking
  every file, the preflight, one transaction per migration with its timeouts and history row);
- one ``psql`` session running every file in its own transaction (``BEGIN; \\i file; COMMIT;``),
  the fastest way a team applies a folder by hand (no history, no timeouts, no checks).

Prints both wall times (best and median of --repeat, runs alternating) and their ratios
(goal: within 1.5x), with the load average before and after. For scale it also times two
floors no Python tool on this stack can go under: ``python -c "import psycopg"``, and a
*bare* process that imports psycopg and pglast's C parser, reads and parses every file, and
sends them 32 migrations to a message (no history, no timeouts, no checks). One untimed run
of each comes first, and Python children may write their bytecode cache, as an installed
program has it. Then loads one
generated file of --load-mb megabytes with ``source.load_dir`` and prints the time and the
peak memory (issue 9 item 7: it was quadratic; 20 MB never finished).

    python bench/migrate_speed.py [--migrations 300] [--repeat 7] [--load-mb 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
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


# Child processes may cache their bytecode, as every installed program does (pip compiles it
# at install time); an environment with PYTHONDONTWRITEBYTECODE would otherwise make every
# run compile pgsteady's modules again (~30 ms here) and time the compiler.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600,
                          env=CHILD_ENV)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({done.returncode}): {done.stderr.strip()}")
    return seconds


def psql_script(folder: Path) -> str:
    return "".join(f"BEGIN;\n\\i {path}\nCOMMIT;\n" for path in sorted(folder.glob("*.sql")))


# The bare floor: what a Python process needs to apply the folder at all (see the docstring).
BARE = """
import sys
from pathlib import Path
import psycopg
from pgsteady.sql import pglast_loader  # pglast's C parser without its AST modules
parse_sql_json = pglast_loader.parser().parse_sql_json
files = sorted(Path(sys.argv[2]).glob("*.sql"))
texts = [f.read_text() for f in files]
for text in texts:
    parse_sql_json(text)
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    for at in range(0, len(texts), 32):
        conn.execute("".join("BEGIN;\\n" + t + "\\n;COMMIT;" for t in texts[at:at + 32]))
"""


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _runs(times: list[float]) -> str:
    return (f"best {min(times):.3f} s, median {statistics.median(times):.3f} s "
            f"(runs: {', '.join(f'{t:.2f}' for t in times)})")


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
    parser.add_argument("--repeat", type=int, default=7)
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
            times: dict[str, list[float]] = {
                "pgsteady": [], "inside": [], "psql": [], "bare": [], "import": []}
            # untimed: bytecode written, files in the page cache, for every contender
            timed([sys.executable, "-m", "pgsteady", "migrate", "--dir", str(folder), "--dsn",
                   server.create_database("bench_warm_pgsteady")])
            timed([sys.executable, "-c", BARE, server.create_database("bench_warm_bare"),
                   str(folder)])
            timed([psql, "-X", "-q", "-d", server.create_database("bench_warm_psql"), "-f",
                   str(script)])
            print(f"load average before: {_load()}")
            for run in range(args.repeat):
                dsn = server.create_database(f"bench_inside_{run}")
                start = time.perf_counter()
                apply.migrate(dsn, source.load_dir(folder))
                times["inside"].append(time.perf_counter() - start)
                dsn = server.create_database(f"bench_pgsteady_{run}")
                times["pgsteady"].append(timed([sys.executable, "-m", "pgsteady", "migrate",
                                                "--dsn", dsn, "--dir", str(folder)]))
                dsn = server.create_database(f"bench_psql_{run}")
                times["psql"].append(timed([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1",
                                            "-d", dsn, "-f", str(script)]))
                dsn = server.create_database(f"bench_bare_{run}")
                times["bare"].append(timed([sys.executable, "-c", BARE, dsn, str(folder)]))
                times["import"].append(timed([sys.executable, "-c", "import psycopg"]))
            print(f"load average after: {_load()}")
            print(f"{args.migrations} migrations, {args.repeat} runs each (2 shared cores: "
                  f"absolute figures are pessimistic, the ratios are the figures)")
            print(f"  pgsteady migrate (whole process): {_runs(times['pgsteady'])}")
            print(f"  pgsteady in-process (load_dir + apply.migrate, no interpreter start): "
                  f"{_runs(times['inside'])}")
            print(f"  one psql session, a transaction per file: {_runs(times['psql'])}")
            print(f"  floor: bare Python process (import, parse, send; no checks): "
                  f"{_runs(times['bare'])}")
            print(f"  floor: python -c 'import psycopg': {_runs(times['import'])}")
            rounds = [ours / theirs for ours, theirs in zip(times["pgsteady"], times["psql"],
                                                            strict=True)]
            print(f"  ratio to psql, round by round (each pair run back to back, so the load "
                  f"drifts least): median {statistics.median(rounds):.2f}x, best "
                  f"{min(rounds):.2f}x, worst {max(rounds):.2f}x")
            for label, pick in (("best", min), ("median", statistics.median)):
                theirs = pick(times["psql"])
                print(f"  ratio to psql ({label}): {pick(times['pgsteady']) / theirs:.2f}x whole "
                      f"process, {pick(times['inside']) / theirs:.2f}x in-process, bare floor "
                      f"{pick(times['bare']) / theirs:.2f}x (goal <= 1.5x whole process)")
        finally:
            server.stop()
            shutil.rmtree(pg_dir, ignore_errors=True)
        if args.load_mb:
            load_big_file(args.load_mb)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
