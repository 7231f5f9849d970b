"""``pgsteady lint``: check migration files for statements that lock, rewrite or break.

Exit codes: 0 clean (warnings allowed), 1 error-level findings, 2 usage error or a file that
does not parse (reported as ``file:line:col: message``), 3 cannot connect (``--dsn``).

Start-up is most of a lint run, so this module imports only what the run needs: the parser
and the rules on a cache miss, psycopg only with ``--dsn``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pgsteady import _majors
from pgsteady._errors_root import EXIT_OK, UsageError
from pgsteady.cli import _renamed
from pgsteady.lint import output, quick
from pgsteady.lint.config import (
    LintConfig,
    check_rule_ids,
    load_config,
    parse_pg_version,
    parse_rows,
)
from pgsteady.lint.report import LintReport
from pgsteady.lint.rules import all_rules, rule_ids

#: The runner profiles, for --help (runners.NAMES; a test keeps them equal).
PROFILES = ("pgsteady, prisma, goose, golang-migrate, dbmate, flyway, diesel, sql-migrate, "
            "tern, sqlx, popx, sqitch, alembic-sql, plain, django")

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from pgsteady.lint import cache
    from pgsteady.lint.files import Unit
    from pgsteady.lint.runners import Choice


def _rule_list(text: str) -> frozenset[str]:
    return frozenset(part.strip() for part in text.split(",") if part.strip())


def _rows(text: str) -> int:
    try:
        return parse_rows(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _pg_version(text: str) -> int:
    try:
        return parse_pg_version(text, "--pg-version")
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(verbs: Any) -> None:
    lint = verbs.add_parser(
        "lint", help="check migration SQL for risky locks, rewrites and breaking changes",
        description="Check migration SQL files for statements that take long locks, rewrite "
                    "tables or break running code. Settings come from [tool.pgsteady.lint] "
                    "in the nearest pyproject.toml; options here override them.",
        epilog="exit codes: 0 clean (warnings allowed), 1 findings, 2 usage or syntax error, "
               "3 cannot connect. Silence one statement with "
               "'-- pgsteady: ignore RULE -- reason', a file with 'ignore-file'.")
    lint.add_argument("files", nargs="*", metavar="FILE",
                      help="SQL files or folders (default: paths from the config)")
    lint.add_argument("--format", choices=output.FORMATS, default="text",
                      help="text (default), json, or github workflow annotations")
    lint.add_argument("--exclude", type=_rule_list, action="append", default=[],
                      metavar="RULES", help="comma-separated rule ids to turn off")
    lint.add_argument("--enable", type=_rule_list, action="append", default=[],
                      metavar="RULES", help="comma-separated opt-in rule ids to turn on")
    lint.add_argument("--warn", type=_rule_list, action="append", default=[],
                      metavar="RULES", help="rule ids to report as warnings (exit 0)")
    lint.add_argument("--pg-version", type=_pg_version, metavar="N",
                      help="oldest PostgreSQL major version the migrations run on "
                           f"(default {_majors.LINT_DEFAULT}; 9.6 and 10 up are understood): "
                           "it changes a finding's advice, never hides one")
    lint.add_argument("--assume-runner-timeouts", action=argparse.BooleanOptionalAction,
                      default=None, help="the runner sets lock_timeout and statement_timeout "
                      "(pgsteady migrate does; default: yes)")
    lint.add_argument("--assume-in-transaction", action=argparse.BooleanOptionalAction,
                      default=None, help="the runner wraps each file in a transaction "
                      "(files the tool runs outside one stay outside)")
    lint.add_argument("--dsn", help="a database to read table sizes from (optional; "
                      "never written to)")
    lint.add_argument("--large-table", type=_rows, metavar="ROWS",
                      help="with --dsn: tables with at least this many rows make size-aware "
                           "findings errors, smaller ones warnings (default 1M; 250k works)")
    tool = lint.add_argument(
        "--tool", metavar="NAME",
        help="how the files are run, which decides transactions, timeouts and the "
             f"Up part: {PROFILES}, or auto (default: detected from the folder's layout)")
    # Checked by runners.check_name (a clearer error than argparse's), completed all the same.
    tool.completions = ("auto", *PROFILES.split(", "))
    _renamed.add_alias(lint, "--runner", "--tool", "tool", metavar="NAME")
    lint.add_argument("--django-settings", metavar="MODULE",
                      help="with --tool django: the project's settings module (default: "
                           "DJANGO_SETTINGS_MODULE); FILES narrow to migrations under them, "
                           "run from the project's folder (where manage.py is)")
    lint.add_argument("--history", metavar="DIR",
                      help="migrations that ran before the files given: replayed for the "
                           "schema (old column types, existing tables), not linted")
    lint.add_argument("--no-cache", action="store_true",
                      help="lint everything again; do not read or write .pgsteady_cache")
    lint.add_argument("--cache-dir", type=Path, metavar="DIR",
                      help="where to keep the cache (default: .pgsteady_cache/lint next to "
                           "pyproject.toml, or here)")
    lint.add_argument("--config", type=Path, metavar="PYPROJECT",
                      help="read [tool.pgsteady.lint] from this file")
    lint.add_argument("--explain", metavar="RULE", help="print a rule's documentation")
    lint.add_argument("--list-rules", action="store_true", help="list every rule id")
    lint.add_argument("--write-docs", type=Path, metavar="DIR",
                      help="write the rule documentation pages into DIR (with examples "
                           "from tests/lint/cases when run from the repository)")
    lint.set_defaults(run=run_lint)


def _config(args: argparse.Namespace) -> LintConfig:
    config = load_config(args.config)
    union = frozenset().union
    known = rule_ids()
    check_rule_ids(config.disable | config.enable | config.warn, known,
                   config.source or "configuration")
    for option in ("exclude", "enable", "warn"):
        check_rule_ids(union(*getattr(args, option)), known, f"--{option}")
    return config.with_overrides(
        pg_version=args.pg_version,
        disable=config.disable | union(*args.exclude) if args.exclude else None,
        enable=config.enable | union(*args.enable) if args.enable else None,
        warn=config.warn | union(*args.warn) if args.warn else None,
        assume_runner_timeouts=args.assume_runner_timeouts,
        assume_in_transaction=args.assume_in_transaction,
        large_table=args.large_table,
    )


def _config_paths(config: LintConfig) -> list[str]:
    """``paths`` from the config, relative to the pyproject.toml that set them (as ruff does),
    shown relative to the current directory."""
    base = Path(config.source).parent if config.source else Path.cwd()
    return [os.path.relpath(base / path) for path in config.paths]


def _use_color(stream: Any) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR")


def _runner(args: argparse.Namespace, config: LintConfig, paths: list[str]) -> Choice:
    from pgsteady.lint import runners  # layouts: not needed on a warm run

    if args.tool:
        chosen, where = runners.check_name(args.tool), "--tool"
    else:
        chosen, where = runners.check_name(config.runner, f"{config.source}: tool"), "config"
    if chosen == "auto":
        return runners.detect(paths)
    return runners.Choice(chosen, f"from {where}")


def _lint(config: LintConfig, units: list[Unit], history: list[Unit],  # noqa: PLR0917
          args: argparse.Namespace, runner: str, store: cache.Cache | None) -> LintReport:
    """Lint the units, reading back what the cache already knows and storing the rest."""
    keys: list[str] = []
    done, entry = 0, None
    if store is not None:
        from pgsteady.lint import cache

        keys = cache.chain(config, runner, units, history)
        done, entry = store.longest(keys)
        if entry is not None and done == len(units):
            return LintReport(entry.reports, runner)
    from pgsteady.lint.engine import Linter  # the parser: misses only

    linter = Linter(config)
    if entry is not None:
        schema = entry.schema
    elif args.dsn:
        from pgsteady.lint import sizes  # psycopg: --dsn only

        schema = sizes.load_catalog(args.dsn)
        schema.change_start = 0
    else:
        schema = linter.start(history)
    report = linter.lint_units(units[done:], schema=schema)
    reports = [*(entry.reports if entry is not None else []), *report.files]
    if store is not None and keys and not any(r.syntax_error for r in reports):
        store.store(keys[-1], cache.Entry(reports, schema))
    return LintReport(reports, runner)


def run_lint(args: argparse.Namespace) -> int:
    if args.explain or args.write_docs:
        from pgsteady.lint import docs  # documentation only

        if args.explain:
            sys.stdout.write(docs.explain(args.explain))
            return EXIT_OK
        cases = Path("tests/lint/cases")
        for path in docs.write_docs(args.write_docs, cases if cases.is_dir() else None):
            sys.stderr.write(f"wrote {path}\n")
        return EXIT_OK
    if args.list_rules:
        for rule in all_rules().values():
            sys.stdout.write(f"{rule.id}\t{rule.message}\n")
        return EXIT_OK
    config = _config(args)
    chosen = args.tool or config.runner
    if chosen and chosen != "auto" and _from_project(chosen):
        return _run_django(args, config)
    paths = args.files or _config_paths(config)
    if not paths:
        raise UsageError("no files to lint: name some, or set paths in [tool.pgsteady.lint]")
    store = None
    if not (args.no_cache or args.dsn):
        from pgsteady.lint import cache  # hashlib, json: not for --no-cache

        store = cache.Cache(args.cache_dir or cache.default_folder(config))
    quick_key = None
    read = [*paths, *filter(None, [args.history])]
    if store is not None:
        quick.stamp(read, config.source)  # before any file is read: an edit is a change
        quick_key = cache.stat_key(config, (args.tool, args.history), read)
        hit = store.quick(quick_key) if quick_key else None
        if hit is not None:  # nothing touched since the last run: no file read
            report = LintReport(hit.reports, hit.runner, hit.skipped)
            runner, reason = hit.runner, hit.reason
        else:
            report, runner, reason = _run(args, config, paths, store)
            if (quick_key and not report.syntax_errors
                    and cache.stat_key(config, (args.tool, args.history), read) == quick_key):
                store.store(quick_key, cache.Quick(report.files, runner, reason,
                                                   report.skipped))
    else:
        report, runner, reason = _run(args, config, paths, store)
    out, err = _show(report, args, runner, reason)
    if store is not None and not report.syntax_errors:
        quick.record(out, _renamed.said(args) + err, report.exit_code, read, config.source)
    return report.exit_code


def _from_project(tool: str) -> bool:
    """Whether ``tool``'s SQL comes from the project rather than files (Django's)."""
    from pgsteady.tools import registry  # a name given: its profile (a small module)

    return tool in registry.MODULES and registry.get(tool).sql_from_project


def _run_django(args: argparse.Namespace, config: LintConfig) -> int:
    """A Django project's migrations, their SQL written by Django (pgsteady.django)."""
    from pgsteady._extras import needs

    settings = args.django_settings or os.environ.get("DJANGO_SETTINGS_MODULE", "")
    if not settings:
        raise UsageError("--tool django needs the project's settings: --django-settings "
                         "mysite.settings (or DJANGO_SETTINGS_MODULE), run from the project's "
                         "folder")
    with needs("django", "--tool django"):
        from pgsteady.django import project

    connection = project.setup(settings)
    from pgsteady.django.lint import lint

    report, linted = lint(connection, include_applied=True, paths=args.files, config=config,
                          dsn=args.dsn)
    _show(report, args, "django", f"{len(linted)} migration(s) of {settings}")
    return report.exit_code


def _run(args: argparse.Namespace, config: LintConfig, paths: list[str],
         store: cache.Cache | None) -> tuple[LintReport, str, str]:
    """Detect the runner, read the files, lint what the content cache does not know."""
    from pgsteady.lint import runners  # layouts: not needed on a warm run

    choice = _runner(args, config, paths)
    downs: list[Path] = []
    not_run: list[Path] = []
    why: dict[Path, str] = {}
    files = runners.files_for(paths, choice.tool, downs, not_run, choice.listing, why)
    units, broken = runners.load(files, choice.tool,
                                 choice.listing.heads if choice.listing else None)
    history: list[Unit] = []
    if args.history:
        if args.dsn:
            sys.stderr.write("pgsteady lint: --history ignored: the database given by --dsn "
                             "knows the schema\n")
        else:
            history = runners.history_for(args.history, files, choice.tool)
    report = _lint(config, units, history, args, choice.tool,
                   None if broken else store)
    for index, file in broken.items():
        report.files[index] = file
    if args.dsn and not report.syntax_errors:
        from pgsteady.lint import sizes  # psycopg: --dsn only

        report = sizes.annotate(report, args.dsn, config.large_table)
        report.runner = choice.tool
    reason = choice.reason
    report.skipped = [(str(p), "a down script beside its up script: it runs on a rollback")
                      for p in downs]
    report.skipped += [(str(p), why.get(p, f"{choice.tool} does not run it as SQL"))
                       for p in not_run]
    placeholders = sum(len(u.placeholders) for u in units)
    if placeholders:
        reason += (f"; read {placeholders} template placeholder"
                   f"{'s' if placeholders != 1 else ''} ({{{{ }}}}, ${{}}) as names")
    if downs:
        reason += (f"; skipped {len(downs)} down script{'s' if len(downs) != 1 else ''} "
                   f"beside their up scripts: name one to lint it")
    if not_run:
        shown = ", ".join(p.name for p in not_run[:3]) + (", ..." if len(not_run) > 3 else "")
        sql_only = all(p.suffix == ".sql" for p in not_run)
        kind = ".sql file" if sql_only else "file"
        reason += (f"; skipped {len(not_run)} {kind}{'s' if len(not_run) != 1 else ''} "
                   f"{choice.tool} does not run as SQL ({shown})"
                   + (": name one to lint it" if sql_only else ""))
    return report, choice.tool, reason


def _show(report: LintReport, args: argparse.Namespace, runner: str, reason: str,
          ) -> tuple[str, str]:
    """Print the report (stdout) and the summary (stderr); what was printed, for
    :func:`quick.record`."""
    out = output.render(report, args.format, color=_use_color(sys.stdout))
    err = ""
    profile = f"runner profile {runner} ({reason})"
    if args.format == "text":
        err = f"{output.render_syntax_errors(report)}{output.summary(report)}; {profile}\n"
    else:
        if report.syntax_errors and args.format == "json":
            err = output.render_syntax_errors(report)
        if args.format == "github":
            err = f"pgsteady lint: {profile}\n"
    sys.stdout.write(out)
    sys.stderr.write(err)
    return out, err
