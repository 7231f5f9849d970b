"""``pgsteady report``: the labs' and the model's JSON as one HTML page."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pgsteady.errors import EXIT_FAILURE, EXIT_OK


def register(verbs: Any) -> None:
    report = verbs.add_parser(
        "report", help="one self-contained HTML page from lab and sim JSON files",
        description="Read the JSON files written by `pgsteady lab ... --json/--out` and "
                    "`pgsteady sim ...` (files, or folders holding them) and write one HTML page "
                    "with no external requests: verdicts first, then each scenario's charts, "
                    "tables and what to look at.")
    report.add_argument("inputs", nargs="*", metavar="PATH", default=["lab-report"],
                        help="JSON files or folders of them (default: lab-report)")
    report.add_argument("--out", default="lab-report/index.html", metavar="FILE",
                        help="where to write the page (default: lab-report/index.html)")
    report.add_argument("--check", action="store_true",
                        help="open the page in headless Chromium: fail (exit 1) on console "
                             "errors, anything its Content-Security-Policy blocks, a weak or "
                             "missing policy, dialogs, network requests, empty charts or "
                             "sideways scroll at 390 px; save desktop and phone screenshots "
                             "next to the page")
    report.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pgsteady.report import build_report

    path = build_report(list(args.inputs), Path(args.out))
    print(path, file=sys.stdout)
    if not args.check:
        return EXIT_OK
    from pgsteady.report.browser import check_page

    seen = check_page(path)
    for shot in seen.screenshots:
        print(f"wrote {shot}", file=sys.stderr)
    problems = seen.problems(path.as_uri())
    for problem in problems:
        print(f"pgsteady: report check: {problem}", file=sys.stderr)
    if problems:
        return EXIT_FAILURE
    print(f"checked in Chromium: {len(seen.chart_sizes)} charts drawn, no console error, "
          "only the page's own script ran (Content-Security-Policy in force), no network "
          "request, no sideways scroll at 390 px", file=sys.stderr)
    return EXIT_OK
