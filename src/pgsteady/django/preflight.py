"""Before ``migrate``: the live sessions that would block the pending migrations, named.

The pending migrations' SQL (:mod:`.collect`) goes through ``pgsteady preflight``'s lock
oracle: which relations each statement locks, in which mode, and who holds or waits for a
conflicting lock there now. Each blocker is placed at the operation in the migration file.
The report is ok only when it knows: a ``RunPython`` operation (Python, its locks unknown)
or a statement whose locks cannot be read from its text makes it not clear, unless the
migration it is in was reviewed and named (``--accept-unknown app.0007_backfill``): its
unknowns are then listed as accepted, and the blockers are still looked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psycopg

from pgsteady.django import _pgsteady as core
from pgsteady.django.collect import Rendered, render
from pgsteady.django.lint import need_database, select


def check(connection: Any, accept: Iterable[str] = ()) \
        -> tuple[core.Report, list[Rendered], list[core.preflight.Unknown]]:
    """The preflight report of the alias's unapplied migrations (and those migrations), and
    the unknowns of the migrations named in ``accept`` (``app_label.name``), taken out of
    the report's. A name that is no migration of the project is a UsageError."""
    need_database(connection, "preflight reads the live sessions of the database the "
                  "migrations will run on: point the alias at that one")
    loader, wanted = select(connection, everyone=True)
    accepted_labels = set(accept)
    strangers = sorted(accepted_labels - {f"{app}.{name}" for app, name in loader.graph.nodes})
    rendered = [r for r in render(connection, loader, wanted)
                if (r.app_label, r.name) in wanted]
    for item in rendered:
        if item.error:
            raise core.MigrationError(f"{item.label}: cannot write its SQL ({item.error})")
    migrations = [core.Migration(number, item.label, Path(item.path), item.sql, item.atomic,
                                 tuple(core.parts_of(Path(item.path), core.UpPart(item.sql))))
                  for number, item in enumerate(rendered, 1)]
    by_path = {item.path: item for item in rendered}
    policy = connection.pgsteady.policy if hasattr(connection, "pgsteady") else core.Policy()
    params = connection.get_connection_params()
    for key in ("context", "cursor_factory", "options"):
        params.pop(key, None)
    params.update(autocommit=True, prepare_threshold=None)
    params.setdefault("connect_timeout", 10)
    with psycopg.connect(**params) as conn:
        core.backstop(conn, policy)
        report = core.preflight.check(conn, migrations, min_age=policy.blocker_age)
    report.blockers = [_placed(b, by_path) for b in report.blockers]
    for item in rendered:
        for operation in item.operations:
            if operation.python:
                report.unknown.append(core.preflight.Unknown(
                    item.path, operation.line, operation.description,
                    "Python code (RunPython): preflight cannot know what it locks"))
    if strangers:
        unknown_in = sorted({item.label for item in rendered
                             if any(u.file == item.path for u in report.unknown)})
        raise core.UsageError(f"--accept-unknown {', '.join(strangers)}: no such migration "
                              f"(app_label.name); pending with unknown locks: "
                              f"{', '.join(unknown_in) or 'none'}")
    reviewed = {item.path for item in rendered if item.label in accepted_labels}
    accepted = [u for u in report.unknown if u.file in reviewed]
    report.unknown = [u for u in report.unknown if u.file not in reviewed]
    return report, rendered, accepted


def _placed(blocker: core.Blocker, by_path: dict[str, Rendered]) -> core.Blocker:
    """The blocker with its need placed at the operation, not at a line of generated SQL."""
    need = blocker.need
    if need is None or not need.where:
        return blocker
    path, _, line = need.where.rpartition(":")
    item = by_path.get(path)
    if item is None or not line.isdigit():
        return blocker
    return dataclasses.replace(blocker, need=dataclasses.replace(
        need, where=item.where(int(line))))
