"""``pgsteady lint``: check migration files for statements that lock, rewrite or break.

Exit codes: 0 clean (warnings allowed), 1 error-level findings, 2 usage error or a file that
does not parse (reported as ``file:line:col: message``), 3 cannot connect (``--dsn``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from pgsteady.errors import EXIT_OK, UsageError
from pgsteady.migrate.lint import docs, output, sizes
from pgsteady.migrate.lint.config import (
    LintConfig,
    check_rule_ids,
    load_config,
    parse_pg_version,
    parse_rows,
)
from pgsteady.migrate.lint.engine import Linter, LintReport, collect_files
from pgsteady.migrate.lint.rules import all_rules


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
                      help="oldest PostgreSQL major version the migrations run on")
    lint.add_argument("--assume-runner-timeouts", action=argparse.BooleanOptionalAction,
                      default=None, help="the runner sets lock_timeout and statement_timeout "
                      "(pgsteady migrate does; default: yes)")
    lint.add_argument("--assume-in-transaction", action=argparse.BooleanOptionalAction,
                      default=None, help="the runner wraps each file in a transaction")
    lint.add_argument("--dsn", help="a database to read table sizes from (optional; "
                      "never written to)")
    lint.add_argument("--large-table", type=_rows, metavar="ROWS",
                      help="with --dsn: tables with at least this many rows make size-aware "
                           "findings errors, smaller ones warnings (default 1M; 250k works)")
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
    known = all_rules()
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


def run_lint(args: argparse.Namespace) -> int:
    if args.explain:
        sys.stdout.write(docs.explain(args.explain))
        return EXIT_OK
    if args.list_rules:
        for rule in all_rules().values():
            sys.stdout.write(f"{rule.id}\t{rule.message}\n")
        return EXIT_OK
    if args.write_docs:
        cases = Path("tests/lint/cases")
        for path in docs.write_docs(args.write_docs, cases if cases.is_dir() else None):
            sys.stderr.write(f"wrote {path}\n")
        return EXIT_OK
    config = _config(args)
    paths = args.files or _config_paths(config)
    if not paths:
        raise UsageError("no files to lint: name some, or set paths in [tool.pgsteady.lint]")
    linter = Linter(config)
    report = LintReport([linter.lint_file(path) for path in collect_files(paths)])
    if args.dsn and not report.syntax_errors:
        report = sizes.annotate(report, args.dsn, config.large_table)
    sys.stdout.write(output.render(report, args.format, color=_use_color(sys.stdout)))
    if args.format == "text":
        sys.stderr.write(output.render_syntax_errors(report))
        if report.findings or report.syntax_errors:
            sys.stderr.write(output.summary(report) + "\n")
    elif report.syntax_errors and args.format == "json":
        sys.stderr.write(output.render_syntax_errors(report))
    return report.exit_code
