"""Lint Django migrations: their SQL, judged as Django runs it, findings at the operation.

Each migration's SQL (:mod:`.collect`) becomes a unit of the ``django`` runner profile: one
transaction unless ``atomic = False``, timeouts assumed set when the alias's ENGINE is
``pgsteady.django`` (its migrate sets them). The migrations before the linted ones are
replayed first, so the schema model knows the tables they made. A finding is moved from the
SQL line to the operation's line in the migration file, its help extended with the Django way
to do it. Pending migrations are one change (``migrate`` applies them in one deploy); with
``--all`` each migration is a change of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.db.migrations.loader import MigrationLoader

from pgsteady.django import _pgsteady as core
from pgsteady.django.collect import Rendered, is_third_party, render

log = logging.getLogger("pgsteady.django")


def select(connection: Any, *, app_labels: Iterable[str] = (), include_applied: bool = False,
           paths: Iterable[str] = (), everyone: bool = False) \
        -> tuple[Any, set[tuple[str, str]]]:
    """The loader and the migrations to lint: unapplied ones, or all of them, of the
    project's own apps (Django's and installed packages' only when named), narrowed to
    ``app_labels`` and to files under ``paths``. ``everyone``: every app's (preflight: all of
    them will run)."""
    from django.apps import apps  # noqa: PLC0415 - after django.setup()

    labels = set(app_labels)
    known = {config.label for config in apps.get_app_configs()}
    unknown = sorted(labels - known)
    if unknown:
        raise core.UsageError(f"no installed app labelled {', '.join(unknown)}; installed: "
                              f"{', '.join(sorted(known))}")
    loader = MigrationLoader(None if include_applied else connection,
                             ignore_no_migrations=True)
    applied = set() if include_applied else set(loader.applied_migrations)
    paths = list(paths)
    roots = [Path(p).resolve() for p in paths]
    matched: set[Path] = set()
    wanted: set[tuple[str, str]] = set()
    for key, migration in loader.graph.nodes.items():
        if roots:
            module = __import__(type(migration).__module__, fromlist=["_"])
            where = Path(module.__file__ or "").resolve()
            under = {root for root in roots if where == root or root in where.parents}
            matched |= under
            if not under:
                continue
        if key in applied:
            continue
        if labels and key[0] not in labels:
            continue
        config = apps.get_app_config(key[0])
        if not (everyone or labels or roots) and is_third_party(config):  # not the project's to fix
            continue
        wanted.add(key)
    empty = [str(path) for path, root in zip(paths, roots, strict=True) if root not in matched]
    if empty:
        raise core.UsageError(f"{', '.join(empty)}: no migration of the project's apps there "
                              f"(name a migration file or a folder holding some)")
    return loader, wanted


def lint(connection: Any, *, app_labels: Iterable[str] = (), include_applied: bool = False,
         paths: Iterable[str] = (), config: core.LintConfig | None = None,
         dsn: str | None = None) -> tuple[core.LintReport, list[Rendered]]:
    """Lint the chosen migrations (see :func:`select`); (report, the migrations linted)."""
    config = config or core.LintConfig()
    need_database(connection)  # before the loader reads which migrations are applied
    loader, wanted = select(connection, app_labels=app_labels,
                            include_applied=include_applied, paths=paths)
    rendered = render(connection, loader, wanted)
    timeouts = hasattr(connection, "pgsteady")  # ENGINE pgsteady.django: migrate sets them
    units, history, linted, keep = [], [], [], []
    for item in rendered:
        unit = core.lint_runners.django_unit(item.label, item.sql, atomic=item.atomic,
                                             engine_sets_timeouts=timeouts)
        chosen = (item.app_label, item.name) in wanted
        if chosen or (include_applied and not item.error):
            units.append(unit)
            keep.append(chosen)
            linted += [item] if chosen else []
        elif not item.error:
            history.append(unit)
    # Pending migrations deploy together: one change (a table one of them makes is new to
    # the others). With --all each migration was a deploy of its own: a change each, so
    # migrations not asked for are linted too, their reports dropped.
    report = core.Linter(config).lint_units(units, history=history)
    report.files = [file for file, chosen in zip(report.files, keep, strict=True) if chosen]
    files = [_at_operations(item, file) for item, file in zip(linted, report.files,
                                                                strict=True)]
    result = core.LintReport(files, "django")
    if dsn and not result.syntax_errors:
        result = core.lint_sizes.annotate(result, dsn, config.large_table)
        result.runner = "django"
    return result, linted


_WHY_LINT = ("Django writes a migration's SQL with the server's help, as sqlmigrate does: "
             "give it one (an empty database will do: nothing is read or written)")


def need_database(connection: Any, why: str = _WHY_LINT) -> None:
    """Django writes a migration's SQL with the server's help (it quotes values through the
    driver), as ``sqlmigrate`` does: CannotConnect, one line, when there is none (``why``
    says what the server is needed for)."""
    from django.db.utils import OperationalError  # noqa: PLC0415 - after django.setup()

    try:
        connection.ensure_connection()
    except OperationalError as exc:
        reason = core.scrub(" ".join(str(exc).split()))
        raise core.CannotConnect(
            f"cannot connect to the database of alias {connection.alias!r} ({reason}); "
            f"{why}") from None


def _at_operations(item: Rendered, file: core.FileReport) -> core.FileReport:
    """The findings of one migration's SQL, placed at its operations in the file."""
    if item.error:
        return core.FileReport(item.path, syntax_error=core.SyntaxProblem(
            item.path, 1, 1, f"{item.label}: cannot write its SQL ({item.error})"))
    if file.syntax_error is not None:
        return core.FileReport(item.path, syntax_error=core.SyntaxProblem(
            item.path, 1, 1, f"{item.label}: its SQL does not parse: "
                             f"{file.syntax_error.message}"))
    findings = []
    for finding in file.findings:
        operation = item.operation_at(finding.line)
        line, col = (operation.line, operation.col) if operation else (1, 1)
        what = f" [{item.label} operation {operation.number}: {operation.description}]" \
            if operation else f" [{item.label}]"
        django = core.DJANGO_HELP.get(finding.rule)
        findings.append(core.Finding(
            item.path, line, col, finding.rule, finding.message + what,
            f"{finding.help}. {django}" if django else finding.help, finding.severity,
            finding.table, finding.rows, finding.size_bytes, finding.lock,
            finding.line, finding.col))
    return core.FileReport(item.path, findings, statements=file.statements)
