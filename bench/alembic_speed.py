"""What pgsteady's Alembic helper costs over a stock env.py, for long histories.

Writes N trivial revisions (``op.execute("SELECT 1")``), then runs ``alembic upgrade head``
in-process on a fresh database of the lab's PostgreSQL, once with a stock ``env.py``
(``context.configure`` + ``begin_transaction`` + ``run_migrations``: all revisions in one
transaction) and once with ``run_alembic_migrations`` (one transaction per revision, with
timeouts, a runner lock and a blocker watch), alternating. Prints the best of ``--runs`` for
each, their ratio and the ratio of medians, per history length, and the load average
before and after (a shared 2-core machine is noisy: compare several runs). Goal: within
1.3x at 1,000 revisions (issue 10; it was 8.6x when the helper recomputed every step for
each revision).

    .venv/bin/python bench/alembic_speed.py [--revisions 100,1000] [--runs 7]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from alembic import command
from alembic.config import Config
from psycopg.conninfo import conninfo_to_dict

from pgsteady.lab import _process
from pgsteady.lab.cluster import Postgres, make_workdir

STOCK_ENV = '''
from alembic import context
from sqlalchemy import create_engine, pool

config = context.config
engine = create_engine(config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
with engine.connect() as connection:
    context.configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()
'''

HELPER_ENV = '''
from alembic import context
from sqlalchemy import create_engine, pool

from pgsteady.migrate.alembic import run_alembic_migrations

config = context.config
engine = create_engine(config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
with engine.connect() as connection:
    run_alembic_migrations(context, connection)
'''

REVISION = '''revision = "{rev}"
down_revision = {down}
branch_labels = None
depends_on = None

from alembic import op


def upgrade():
    op.execute("SELECT 1")


def downgrade():
    pass
'''


def write_project(root: Path, env: str, revisions: int) -> None:
    (root / "versions").mkdir(parents=True)
    (root / "env.py").write_text(env)
    down = "None"
    for number in range(1, revisions + 1):
        rev = f"r{number:05d}"
        (root / "versions" / f"{rev}_trivial.py").write_text(REVISION.format(rev=rev, down=down))
        down = f'"{rev}"'


def upgrade_seconds(server: Postgres, root: Path, dbname: str) -> float:
    dsn = server.create_database(dbname)
    try:
        info = conninfo_to_dict(dsn)
        cfg = Config()
        cfg.set_main_option("script_location", str(root))
        # The lab's DSN names a passfile (never the password); the URL passes it on.
        passfile = f"?passfile={quote(info['passfile'])}" if info.get("passfile") else ""
        cfg.set_main_option("sqlalchemy.url", f"postgresql+psycopg://{info['user']}@"
                                              f"{info['host']}:{info['port']}/{info['dbname']}"
                                              f"{passfile}".replace("%", "%%"))
        start = time.perf_counter()
        command.upgrade(cfg, "head")
        return time.perf_counter() - start
    finally:
        server.drop_database(dbname)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--revisions", default="100,1000",
                        help="history lengths, comma-separated (default 100,1000)")
    parser.add_argument("--runs", type=int, default=7,
                        help="runs of each, alternating (best and median are printed)")
    args = parser.parse_args()
    lengths = [int(n) for n in args.revisions.split(",")]
    who = _process.run_as()
    workdir = make_workdir(None, who, prefix="pgsteady-bench-")
    projects = Path(tempfile.mkdtemp(prefix="pgsteady-alembic-bench-"))
    server = Postgres(workdir, who=who)
    try:
        server.start()
        print(f"load average before: {_load()} (2 shared cores: compare ratios, not seconds)")
        print(f"{'revisions':>9}  {'stock env.py':>12}  {'helper':>9}  {'ratio':>6}  "
              f"(best of {args.runs}; median ratio after)")
        for length in lengths:
            stock, helper = projects / f"stock{length}", projects / f"helper{length}"
            write_project(stock, STOCK_ENV, length)
            write_project(helper, HELPER_ENV, length)
            # One untimed run each first: it compiles the revisions' bytecode (__pycache__).
            upgrade_seconds(server, stock, f"s{length}_warm")
            upgrade_seconds(server, helper, f"h{length}_warm")
            times: dict[str, list[float]] = {"stock": [], "helper": []}
            for run in range(args.runs):
                times["stock"].append(upgrade_seconds(server, stock, f"s{length}_{run}"))
                times["helper"].append(upgrade_seconds(server, helper, f"h{length}_{run}"))
            best_stock, best_helper = min(times["stock"]), min(times["helper"])
            median = statistics.median(times["helper"]) / statistics.median(times["stock"])
            print(f"{length:>9}  {best_stock:>11.2f}s  {best_helper:>8.2f}s  "
                  f"{best_helper / best_stock:>5.2f}x  median {median:.2f}x   (all runs: stock "
                  f"{', '.join(f'{t:.2f}' for t in times['stock'])}; helper "
                  f"{', '.join(f'{t:.2f}' for t in times['helper'])})", flush=True)
        print(f"load average after: {_load()}")
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(projects, ignore_errors=True)


if __name__ == "__main__":
    main()
