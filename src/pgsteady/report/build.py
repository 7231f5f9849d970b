"""Reading every input, then writing the page atomically: a fault leaves no half-written page."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pgsteady.errors import UsageError
from pgsteady.report.inputs import load_all
from pgsteady.report.page import render_page


def build_report(paths: list[str], out: Path) -> Path:
    """Write the page for ``paths`` (files or folders of JSON) to ``out``; returns its path."""
    results = load_all(paths)
    html = render_page(results)
    out = out.resolve()
    if out.is_dir():
        raise UsageError(f"{out} is a folder; give --out a file name such as "
                         f"{out / 'index.html'}")
    if out.parent.exists() and not out.parent.is_dir():
        raise UsageError(f"{out.parent} is not a folder; choose another --out")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=out.parent)
    except OSError as exc:
        raise UsageError(f"{out}: cannot write the page there ({exc.strerror}); choose "
                         "another --out") from None
    try:
        # A lone surrogate ("\ud800" in the JSON) is not text; it shows as "?", not a crash.
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
            f.write(html)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"{out}: cannot write the page there ({exc.strerror}); choose "
                         "another --out") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
