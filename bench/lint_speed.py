"""How fast is ``pgsteady lint``, against squawk measured in the same run?

Cases, each written to a temporary folder:

- ``large``: one file of N statements (default 10 000) from templates shaped like real
  migrations (tables, columns, indexes, constraints, backfills, renames, drops, plain DML);
  also linted in-process, for statements per second;
- ``folder``: a typical migration folder, a few hundred small files (default 300);
- ``single``: one small migration file (what a pre-commit hook or an editor lints);
- ``floor``: the cold folder taken apart (interpreter start, pglast's import, lint's imports,
  parsing the folder with nothing else), to show what a CPython process cannot go below;
- ``warm``: the folder again with the cache warm (pgsteady only; squawk has no cache);
- ``inserts``: a 50,000-row data file (one INSERT per row) for peak memory;
- ``insert1``: the same rows in one INSERT statement.

Every command runs as a whole process (interpreter start, imports, parse, rules, output):
pgsteady as its installed ``pgsteady`` command, as a user or a pre-commit hook runs it,
``--repeat`` times, alternating pgsteady and squawk so both see the same machine. Printed per
case: best and median wall time, median CPU time (user + system, which a busy machine disturbs less
than wall time), peak memory (max RSS), and pgsteady/squawk ratios of each. pgsteady runs with
``--no-cache`` except in ``warm``. squawk is found next to this interpreter or on PATH
(``pip install squawk-cli``, the ``bench`` extra); without it only pgsteady's figures print.

    python bench/lint_speed.py [--statements 10000] [--files 300] [--repeat 7] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TEMPLATES = [
    "CREATE TABLE t{i} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now(), data jsonb);",
    "ALTER TABLE users ADD COLUMN c{i} text;",
    "ALTER TABLE users ADD COLUMN c{i} integer NOT NULL DEFAULT 0;",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_{i} ON orders (customer_id, created_at);",
    "CREATE INDEX idx_{i} ON orders (status);",
    "ALTER TABLE orders ADD CONSTRAINT fk_{i} FOREIGN KEY (customer_id) REFERENCES customers (id)"
    " NOT VALID;",
    "ALTER TABLE orders VALIDATE CONSTRAINT fk_{i};",
    "ALTER TABLE accounts ALTER COLUMN c{i} SET NOT NULL;",
    "ALTER TABLE accounts ALTER COLUMN c{i} TYPE text;",
    "UPDATE accounts SET plan = 'free' WHERE id BETWEEN {i} AND {i} + 1000;",
    "INSERT INTO settings (key, value) VALUES ('k{i}', 'v');",
    "COMMENT ON COLUMN users.c{i} IS 'added in release {i}';",
    "ALTER TABLE users RENAME COLUMN c{i} TO d{i};",
    "DROP INDEX CONCURRENTLY IF EXISTS idx_old_{i};",
    "SELECT count(*) FROM users WHERE id > {i};",
    "ALTER TABLE events ADD COLUMN payload json;",
]


def generate(count: int, seed: int = 6) -> str:
    """``count`` statements, one per line, from the templates in a fixed random order."""
    rng = random.Random(seed)
    return "\n".join(rng.choice(TEMPLATES).format(i=i) for i in range(count)) + "\n"


def write_folder(folder: Path, files: int, seed: int = 7) -> list[Path]:
    """A migration folder: ``files`` files of 1-6 statements, a third of them new tables."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number in range(1, files + 1):
        lines = [rng.choice(TEMPLATES).format(i=number * 10 + k)
                 for k in range(rng.randint(1, 6))]
        path = folder / f"{number:04d}_change_{number}.sql"
        path.write_text(f"-- migration {number}\n" + "\n".join(lines)
                        + "\n")
        paths.append(path)
    return paths


def write_inserts(path: Path, rows: int = 50_000, *, one_statement: bool = False) -> None:
    """A data file: one INSERT per row, as ``pg_dump --inserts`` writes them, or one INSERT
    with every row in its VALUES list."""
    head = "INSERT INTO cities (id, name, country, population, founded) VALUES "
    with path.open("w") as out:
        out.write("CREATE TABLE IF NOT EXISTS cities (id bigint PRIMARY KEY, name text, "
                  "country text, population bigint, founded date);\n")
        if one_statement:
            out.write(head + "\n")
        for i in range(rows):
            values = (f"({i}, 'City number {i}', 'Country {i % 200}', {i * 37 % 9_000_000}, "
                      f"'{1000 + i % 1000:04d}-01-01')")
            if one_statement:
                out.write(values + (",\n" if i < rows - 1 else ";\n"))
            else:
                out.write(f"{head}{values};\n")


@dataclass
class Run:
    wall: float  # seconds, best of the repeats
    cpu: float  # seconds, median user + system
    rss_kb: int  # peak resident memory, largest seen
    wall_median: float = 0.0  # seconds, median of the repeats


_PROBE = """
import resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)
"""


#: Bytecode is cached as an installed package has it (pip compiles on install); an
#: environment with PYTHONDONTWRITEBYTECODE would otherwise compile every module every run.
ENVIRONMENT = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def measure_once(command: list[str], cwd: Path) -> tuple[float, float, int]:
    """(wall, cpu, max RSS in KB) of one run of ``command``, measured by a small parent."""
    out = subprocess.run([sys.executable, "-c", _PROBE, *command], capture_output=True,
                         text=True, cwd=cwd, check=True, timeout=600,
                         env=ENVIRONMENT).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def compare(repeat: int, commands: dict[str, list[str]], cwd: Path) -> dict[str, Run]:
    """Run each command ``repeat`` times, interleaved, and summarize each."""
    samples: dict[str, list[tuple[float, float, int]]] = {name: [] for name in commands}
    for command in commands.values():  # once unmeasured: bytecode written, files cached
        measure_once(command, cwd)
    for _ in range(repeat):
        for name, command in commands.items():
            samples[name].append(measure_once(command, cwd))
    return {name: Run(min(s[0] for s in runs), statistics.median(s[1] for s in runs),
                      max(s[2] for s in runs), statistics.median(s[0] for s in runs))
            for name, runs in samples.items()}


def pgsteady_command() -> list[str]:
    """The ``pgsteady`` command as users run it: the installed entry point beside this
    interpreter (``python -m`` adds runpy's imports, about 4 ms, to every run), else
    ``python -m pgsteady``."""
    script = Path(sys.executable).with_name("pgsteady")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pgsteady"]


def find_squawk() -> str | None:
    beside = Path(sys.executable).with_name("squawk")
    return str(beside) if beside.exists() else shutil.which("squawk")


def report(case: str, runs: dict[str, Run], goal: str = "") -> dict[str, object]:
    ours = runs["pgsteady"]
    line = (f"{case:8} pgsteady wall {ours.wall * 1000:6.0f} ms (median "
            f"{ours.wall_median * 1000:4.0f})  cpu {ours.cpu * 1000:6.0f} ms  rss "
            f"{ours.rss_kb / 1024:5.1f} MB")
    figures: dict[str, object] = {"case": case, "pgsteady": vars(ours)}
    theirs = runs.get("squawk")
    if theirs is not None:
        ratios = {"wall": ours.wall / theirs.wall, "cpu": ours.cpu / theirs.cpu,
                  "rss": ours.rss_kb / theirs.rss_kb,
                  "wall_median": ours.wall_median / theirs.wall_median}
        line += (f"\n{'':8} squawk   wall {theirs.wall * 1000:6.0f} ms (median "
                 f"{theirs.wall_median * 1000:4.0f})  cpu {theirs.cpu * 1000:6.0f} ms  rss "
                 f"{theirs.rss_kb / 1024:5.1f} MB"
                 f"\n{'':8} ratio    wall {ratios['wall']:5.2f}x (median "
                 f"{ratios['wall_median']:5.2f}x)  cpu {ratios['cpu']:5.2f}x     rss "
                 f"{ratios['rss']:4.2f}x")
        figures |= {"squawk": vars(theirs), "ratio": ratios}
    print(line + (f"   ({goal})" if goal else ""))
    return figures


#: What a cold folder run cannot go below, each a whole process on the same folder.
_PARSE_ONLY = """
import os, sys
from pgsteady.sql.pglast_loader import parser
pg = parser()
for name in sorted(os.listdir(sys.argv[1])):
    text = open(os.path.join(sys.argv[1], name), encoding="utf-8").read()
    for piece in pg.split(text, with_parser=False, only_slices=True):
        pg.parse_sql_json(text[piece])
"""
_IMPORTS_ONLY = ("import pgsteady.cli, pgsteady.cli.lint, pgsteady.lint.engine, "
                 "pgsteady.lint.runners\n"
                 "from pgsteady.lint.rules import all_rules\nall_rules()\n")


def floor(repeat: int, folder: Path, squawk: str | None, files: list[Path],
          root: Path) -> dict[str, object]:
    """The cold folder case taken apart: interpreter start, importing pglast (whole, and the
    parser alone as lint loads it), lint's imports, and parsing the folder with nothing else,
    next to squawk on the same files."""
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import pglast (whole)": [sys.executable, "-c", "import pglast"],
        "pglast parser as lint loads it": [
            sys.executable, "-c",
            "from pgsteady.sql.pglast_loader import parser\nparser()"],
        "lint's imports, no work": [sys.executable, "-c", _IMPORTS_ONLY],
        "split+parse the folder, nothing else": [sys.executable, "-c", _PARSE_ONLY,
                                                  str(folder)],
    }
    if squawk:
        commands["squawk on the folder"] = [squawk, "--reporter", "gcc", *map(str, files)]
    runs = compare(repeat, commands, root)
    print("floor    (whole processes, best wall / median cpu)")
    for name, run in runs.items():
        print(f"{'':8} {name:38} wall {run.wall * 1000:5.0f} ms  cpu {run.cpu * 1000:5.0f} ms")
    return {"case": "floor", **{name: vars(run) for name, run in runs.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--statements", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", type=Path, help="write the generated inputs here and keep them")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()

    from pgsteady.lint.engine import Linter

    root = args.keep or Path(tempfile.mkdtemp(prefix="pgsteady-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    squawk = find_squawk()
    pgsteady = [*pgsteady_command(), "lint"]
    print(f"pgsteady: {' '.join(pgsteady)}")
    figures: list[dict[str, object]] = []
    try:
        large = root / "large.sql"
        large.write_text(generate(args.statements), encoding="utf-8")
        folder = root / "migrations"
        files = write_folder(folder, args.files)
        single = files[len(files) // 2]
        inserts = root / "inserts.sql"
        write_inserts(inserts)
        insert1 = root / "insert1.sql"
        write_inserts(insert1, one_statement=True)

        linter = Linter()
        sql = large.read_text()
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            lint_report = linter.lint_text(sql, str(large))
            best = min(best, time.perf_counter() - start)
        assert lint_report.syntax_error is None
        print(f"in-process: {lint_report.statements} statements, {len(lint_report.findings)} "
              f"findings in {best * 1000:.0f} ms ({lint_report.statements / best:,.0f} "
              f"statements/s)")
        if squawk:
            version = subprocess.run([squawk, "--version"], capture_output=True, text=True,
                                     check=False).stdout.strip()
            print(f"peer: {version} (--reporter gcc)")

        def both(paths: list[Path], squawk_paths: list[Path] | None = None,
                 ) -> dict[str, list[str]]:
            """pgsteady (no cache) and squawk on the same input (squawk wants files)."""
            commands = {"pgsteady": [*pgsteady, "--no-cache", *map(str, paths)]}
            if squawk:
                commands["squawk"] = [squawk, "--reporter", "gcc",
                                      *map(str, squawk_paths or paths)]
            return commands

        figures.append(report("large", compare(args.repeat, both([large]), root),
                              "goal: at most 1.5x squawk"))
        figures.append(report("folder", compare(args.repeat, both([folder], files), root),
                              "goal: at most 2x squawk"))
        figures.append(floor(args.repeat, folder, squawk, files, root))
        figures.append(report("single", compare(args.repeat, both([single]), root),
                              "goal: under 150 ms"))
        subprocess.run([*pgsteady, str(folder)], capture_output=True, cwd=root, check=False)
        warm = compare(args.repeat, {"pgsteady": [*pgsteady, str(folder)]}, root)
        figures.append(report("warm", warm, "goal: under 50 ms"))
        for case, path in (("inserts", inserts), ("insert1", insert1)):
            figures.append(report(case, compare(max(3, args.repeat // 2), both([path]), root),
                                  "goal: memory under 2x squawk"))
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
