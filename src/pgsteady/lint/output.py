"""Render a lint report: text for people, JSON for programs, annotations for GitHub Actions.

Renderers return strings and never print; colour is the caller's decision (a terminal, and
no ``NO_COLOR``), so tests render deterministically.
"""

from __future__ import annotations

from pgsteady.lint.report import Finding, LintReport, SyntaxProblem

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

#: Bump when a key changes meaning or disappears; adding keys does not bump it.
SCHEMA_VERSION = 1
FORMATS = ("text", "json", "github")

_RESET = "\x1b[0m"
_STYLE = {"path": "\x1b[1m", "error": "\x1b[1;31m", "warning": "\x1b[1;33m",
          "help": "\x1b[36m", "dim": "\x1b[2m"}


def _paint(text: str, style: str, color: bool) -> str:
    return f"{_STYLE[style]}{text}{_RESET}" if color else text


def render_text(report: LintReport, *, color: bool = False) -> str:
    """``file:line:col rule-id message`` then an indented help line, per finding."""
    lines = []
    for f in report.findings:
        where = _paint(f"{f.path}:{f.line}:{f.col}", "path", color)
        rule = _paint(f.rule, f.severity, color)
        tag = " warning:" if f.severity == "warning" else ""
        lines.append(f"{where} {rule}{tag} {f.message}")
        lines.append(_paint(f"  help: {f.help}", "help", color))
    return "\n".join(lines) + ("\n" if lines else "")


def render_syntax_errors(report: LintReport) -> str:
    """One line per file that did not parse: ``file:line:col: message``."""
    return "".join(f"{problem}\n" for problem in report.syntax_errors)


def summary(report: LintReport) -> str:
    """``3 findings (2 errors, 1 warning) in 4 files, 120 statements``."""
    findings = report.findings
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    files, statements = len(report.files), report.statements
    text = (f"{len(findings)} finding{'s' * (len(findings) != 1)} "
            f"({errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}) "
            f"in {files} file{'s' * (files != 1)}, {statements} "
            f"statement{'s' * (statements != 1)}")
    if report.syntax_errors:
        text += f"; {len(report.syntax_errors)} file(s) did not parse"
    return text


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        "path": f.path, "line": f.line, "column": f.col, "rule": f.rule,
        "severity": f.severity, "message": f.message, "help": f.help,
        "table": f.table, "rows": f.rows, "size_bytes": f.size_bytes, "lock": f.lock,
    }


def _syntax_json(p: SyntaxProblem) -> dict[str, Any]:
    return {"path": p.path, "line": p.line, "column": p.col, "message": p.message}


def render_json(report: LintReport) -> str:
    """The whole report as one JSON document with a ``schema_version``; keys are stable."""
    import json  # noqa: PLC0415 -- only this format needs it; text runs start without it

    findings = report.findings
    errors = sum(f.severity == "error" for f in findings)
    document = {
        "schema_version": SCHEMA_VERSION,
        "summary": {
            "files": len(report.files), "statements": report.statements,
            "errors": errors, "warnings": len(findings) - errors,
            "syntax_errors": len(report.syntax_errors), "exit_code": report.exit_code,
            "runner": report.runner,
            "skipped": [{"path": path, "reason": reason} for path, reason in report.skipped],
        },
        "findings": [_finding_json(f) for f in findings],
        "syntax_errors": [_syntax_json(p) for p in report.syntax_errors],
    }
    return json.dumps(document, indent=2) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: LintReport) -> str:
    """GitHub Actions workflow commands: one ``::error``/``::warning`` line per finding."""
    lines = []
    for p in report.syntax_errors:
        lines.append(f"::error file={_escape_property(p.path)},line={p.line},col={p.col},"
                     f"title=syntax-error::{_escape_data(p.message)}")
    for f in report.findings:
        level = "error" if f.severity == "error" else "warning"
        lines.append(f"::{level} file={_escape_property(f.path)},line={f.line},col={f.col},"
                     f"title={_escape_property(f.rule)}::"
                     f"{_escape_data(f.message)}\n{_escape_data('help: ' + f.help)}"
                     .replace("\n", "%0A"))
    return "\n".join(lines) + ("\n" if lines else "")


def render(report: LintReport, fmt: str, *, color: bool = False) -> str:
    """Dispatch on ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "json":
        return render_json(report)
    if fmt == "github":
        return render_github(report)
    return render_text(report, color=color)
