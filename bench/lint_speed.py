"""How fast is ``pgsteady lint``? Statements per second, whole-process time, squawk's ratio.

Generates N statements (default 10 000) from a mix of templates shaped like real migrations
(tables, columns, indexes, constraints, backfills, renames, drops, plain DML), writes them
to one file, then:

- lints it in-process (best of --repeat runs) and prints statements per second;
- runs ``pgsteady lint FILE`` as a whole process (interpreter start, imports, parse, rules,
  output) and prints the best wall time, and the bare ``import pgsteady.cli`` time within it;
- if a ``squawk`` binary is on PATH or next to this interpreter (``pip install squawk-cli``),
  runs it on the same file (``--reporter gcc``, its plainest output) and prints the ratio.

    python bench/lint_speed.py [--statements 10000] [--repeat 5] [--keep FILE]
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
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


def best_of(repeat: int, command: list[str]) -> float:
    """Best wall time of ``repeat`` runs of ``command`` (output discarded)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        best = min(best, time.perf_counter() - start)
    return best


def find_squawk() -> str | None:
    beside = Path(sys.executable).with_name("squawk")
    return str(beside) if beside.exists() else shutil.which("squawk")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--statements", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="write the generated SQL here and keep it")
    args = parser.parse_args()

    from pgsteady.migrate.lint.engine import Linter

    sql = generate(args.statements)
    folder = Path(tempfile.mkdtemp(prefix="pgsteady-bench-"))
    path = args.keep or folder / "bench.sql"
    path.write_text(sql, encoding="utf-8")
    try:
        linter = Linter()
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            report = linter.lint_text(sql, str(path))
            best = min(best, time.perf_counter() - start)
        assert report.syntax_error is None
        print(f"statements:            {report.statements}")
        print(f"findings:              {len(report.findings)}")
        print(f"in-process lint:       {best * 1000:.0f} ms "
              f"({report.statements / best:,.0f} statements/s)")

        pgsteady = [sys.executable, "-m", "pgsteady", "lint", str(path)]
        whole = best_of(args.repeat, pgsteady)
        startup = best_of(args.repeat, [sys.executable, "-c", "import pgsteady.cli"])
        print(f"pgsteady whole-process: {whole * 1000:.0f} ms "
              f"(of which interpreter + imports: {startup * 1000:.0f} ms)")

        squawk = find_squawk()
        if squawk is None:
            print("squawk:                not installed (pip install squawk-cli) - no ratio")
            return 0
        version = subprocess.run([squawk, "--version"], capture_output=True, text=True,
                                 check=False).stdout.strip()
        theirs = best_of(args.repeat, [squawk, "--reporter", "gcc", str(path)])
        print(f"{version} whole-process: {theirs * 1000:.0f} ms (--reporter gcc)")
        print(f"ratio pgsteady/squawk:  {whole / theirs:.2f}x (goal: at most 1.5x)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # --keep writes its file elsewhere
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
