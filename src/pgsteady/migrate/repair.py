"""Accepting an intended disagreement between the folder and the history (Flyway's repair).

``pgsteady migrate --accept VERSION``: an edited or renamed file is recorded as it is now, a
version whose file is gone is forgotten, an unfinished one is recorded as applied. Nothing
else runs: the next ``migrate`` applies what is pending.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg

from pgsteady.errors import UsageError
from pgsteady.migrate import apply, history, status
from pgsteady.migrate.source import Migration
from pgsteady.tools import registry

log = logging.getLogger("pgsteady.migrate")


def accept(dsn: str, migrations: Sequence[Migration], tags: Sequence[str],
           policy: apply.Policy | None = None) -> list[status.Entry]:
    """Accept intended disagreements (Flyway's ``repair``): an edited or renamed file's new
    name and checksum, a missing file's row removed, an unfinished one recorded as applied.
    Applies nothing else."""
    policy = policy or apply.Policy()
    store = apply.store_of(policy, migrations)
    with apply.connect(dsn) as conn:
        apply.refuse_transaction_pooler(conn, dsn)
        with apply.runner_lock(conn, policy.runner_wait,
                               apply.tool_locks(conn, store.tool, store.schema, store.table)):
            apply.backstop(conn, policy)
            done = _accept(conn, store, migrations, tags, policy)
    return done


def _accept(conn: psycopg.Connection[Any], store: history.Store,
            migrations: Sequence[Migration], tags: Sequence[str],
            policy: apply.Policy) -> list[status.Entry]:
    done: list[status.Entry] = []
    entries = {e.tag: e for e in apply.states(conn, migrations, policy)}
    for tag in tags:
        entry = entries.get(tag) or _entry_by_version(entries, tag, store.tool)
        if entry is None or entry.state not in (status.CHANGED, status.MISSING,
                                                status.UNFINISHED):
            state = "unknown" if entry is None else entry.state
            matched = f" ({entry.migration.path.name} matches its row in {store.qualified})" \
                if entry is not None and entry.migration is not None and entry.row is not None \
                else ""
            raise UsageError(f"--accept {tag}: nothing to accept, that version is {state}"
                             f"{matched}; see pgsteady migrate --status")
        if entry.state == status.MISSING and entry.row is not None:
            # the row of a file that is there is never removed: the file would run again
            twin = next((m for m in migrations if m.has_version(entry.row.stored or entry.tag)),
                        None)
            if twin is not None:
                raise UsageError(f"--accept {tag}: refused, {twin.path.name} in the folder has "
                                 f"that version, so its row in {store.qualified} stays (without "
                                 f"it the file would run again); see pgsteady migrate --status")
        with conn.transaction():
            if entry.state == status.MISSING and entry.row is not None:
                store.forget(conn, entry.row)
            elif entry.migration is not None:
                store.realign(conn, entry.migration, entry.row)
        log.warning("accepted %s", entry.describe())
        done.append(entry)
    return done


def _entry_by_version(entries: dict[str, status.Entry], tag: str,
                      tool: str) -> status.Entry | None:
    """The entry ``tag`` names when it is not an entry's own tag (``--accept 1`` for
    ``0001``; for Flyway, any version Flyway compares as equal: ``1.0`` for ``1``)."""
    keyed = registry.get(tool)
    wanted = keyed.version_key(tag)
    for entry in entries.values():
        if entry.migration is not None:
            if entry.migration.has_version(tag):
                return entry
        elif wanted is not None and keyed.version_key(entry.tag) == wanted:
            return entry
    return None
