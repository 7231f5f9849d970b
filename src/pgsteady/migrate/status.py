"""Does the folder agree with the history table? Every disagreement, named.

A deploy gate must not say "up to date" while the schema does not match the folder, so each of
these refuses the run (exit 1) until it is fixed or explicitly accepted
(``pgsteady migrate --accept VERSION``, as Flyway's ``repair``):

- ``changed``: an applied file was edited, or another file took its version (name differs);
- ``missing``: an applied version has no file in the folder (or the folder is empty);
- ``unfinished``: a migration that runs outside a transaction started and never finished;
- ``out-of-order``: a pending version older than the newest applied one (allowed with
  ``--allow-out-of-order``).

A started ``CREATE INDEX CONCURRENTLY`` is not a disagreement: the runner knows how to finish
it (drop the INVALID index and build again, or record a valid one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pgsteady.migrate import source
from pgsteady.migrate.source import Migration
from pgsteady.tools import registry
from pgsteady.tools.registry import Row

APPLIED = "applied"
PENDING = "pending"
CHANGED = "changed"
MISSING = "missing"
UNFINISHED = "unfinished"
OUT_OF_ORDER = "out-of-order"
DISAGREEMENTS = (CHANGED, MISSING, UNFINISHED, OUT_OF_ORDER)


@dataclass(frozen=True)
class Entry:
    """One version as the folder and the history see it."""

    tag: str
    state: str
    migration: Migration | None
    row: Row | None
    detail: str = ""

    def describe(self) -> str:
        where = str(self.migration.path) if self.migration is not None else \
            f"version {self.tag}"
        return f"{where}: {self.state}" + (f" ({self.detail})" if self.detail else "")

    def as_dict(self) -> dict[str, Any]:
        m = self.migration
        return {"version": self.tag, "state": self.state, "detail": self.detail or None,
                "name": m.name if m is not None else (self.row.name if self.row else None),
                "file": str(m.path) if m is not None else None}


def resumable(migration: Migration) -> bool:
    """A started migration the runner can finish by itself on the next run: one made only of
    named concurrent index builds (each is kept if VALID, dropped and built again if INVALID).
    Any other statement may have taken effect before the process died and may not be safe to
    run again: such a file is unfinished until someone looks."""
    return not migration.transactional and all(
        s.kind == "CREATE INDEX CONCURRENTLY" and s.node is not None and s.node.idxname
        for s in migration.statements)


def partly_applied_note(migration: Migration) -> str:
    """For a pending no-transaction file of several statements: that a run which failed
    part-way left its first statements applied. The tools' histories record such a file only
    once all of it ran and have no place for its steps, so how many ran cannot be read back;
    this says so plainly rather than showing a bare "pending"."""
    steps = len(migration.parts)
    if migration.transactional or steps < 2:
        return ""
    tool = source.tool_name(migration.tool)
    return (f"its {steps} statements run one by one outside a transaction: if a run failed "
            f"part-way, the statements before the failed one are applied though the history "
            f"cannot show it, and {tool} reruns the whole file")


def compare(migrations: Sequence[Migration], applied: dict[str, Row], *,
            allow_out_of_order: bool = False, check_checksums: bool = True) -> list[Entry]:
    """Every version of the folder and the history, in order, with its state."""
    entries: list[Entry] = []
    folder = {m.tag: m for m in migrations}
    newest = max((m.order for m in migrations if m.tag in applied
                  and applied[m.tag].finished and not m.repeatable), default=None)
    for migration in migrations:
        row = applied.get(migration.tag)
        if row is None:
            late = newest is not None and migration.order < newest and \
                not migration.repeatable
            if late and not allow_out_of_order:
                entries.append(Entry(migration.tag, OUT_OF_ORDER, migration, None,
                                     "older than the newest applied version"))
            else:
                entries.append(Entry(migration.tag, PENDING, migration, None,
                                     partly_applied_note(migration)))
        elif not row.finished:
            state = PENDING if resumable(migration) else UNFINISHED
            entries.append(Entry(migration.tag, state, migration, row,
                                 "started, never finished; it ran outside a transaction"))
        elif row.name is not None and row.name != migration.name and \
                registry.get(migration.tool).keeps_names:
            entries.append(Entry(migration.tag, CHANGED, migration, row,
                                 f"applied as {row.name!r}, the file now says "
                                 f"{migration.name!r}"))
        elif check_checksums and row.checksum is not None and \
                row.checksum != migration.checksum:
            entries.append(Entry(migration.tag, CHANGED, migration, row,
                                 "edited after it was applied"))
        else:
            entries.append(Entry(migration.tag, APPLIED, migration, row))
    for tag, row in applied.items():
        if tag not in folder and row.elsewhere is not None:  # applied from code, not a file
            entries.append(Entry(tag, APPLIED, None, row, row.elsewhere))
        elif tag not in folder:
            entries.append(Entry(tag, MISSING, None, row,
                                 f"applied{f' as {row.name!r}' if row.name else ''}, "
                                 f"no file in the folder"))
    return entries


def disagreements(entries: Sequence[Entry]) -> list[Entry]:
    return [e for e in entries if e.state in DISAGREEMENTS]


def pending(entries: Sequence[Entry]) -> list[Migration]:
    return [e.migration for e in entries if e.state == PENDING and e.migration is not None]


def refusal(found: Sequence[Entry], history: str) -> str:
    """One line naming every disagreement and the ways out."""
    named = "; ".join(e.describe() for e in found)
    return (f"the folder and {history} disagree, nothing applied: {named}. Fix the folder, or "
            f"accept each intended change with pgsteady migrate --accept VERSION (out-of-order "
            f"versions: --allow-out-of-order); see pgsteady migrate --status")
