"""Alembic env.py that hands the revisions to pgsteady.

Instead of ``context.configure(...)``, ``context.begin_transaction()`` and
``context.run_migrations()`` (all revisions in one transaction, no lock_timeout),
``run_alembic_migrations`` runs each revision in its own transaction with lock and statement
timeouts, and retries a revision that cannot get its locks.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine, pool

from pgsteady.migrate.alembic import run_alembic_migrations
from pgsteady.migrate.apply import Policy

config = context.config


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # A real project writes its numbers here; the tests pass smaller ones.
    budget = float(os.environ.get("PGSTEADY_EXAMPLE_BUDGET", "120"))
    policy = config.attributes.get("pgsteady_policy") or Policy(lock_timeout=5,
                                                                 retry_budget=budget)
    engine = create_engine(config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
    with engine.connect() as connection:
        run_alembic_migrations(context, connection, policy=policy)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
