"""Lint reports on the repo's own corpus as one JSON document, to compare two commits byte for byte.

A refactor or a speed change must not change a finding: run this before and after and diff
the outputs (``python scripts/lint_snapshot.py > before.json``). It lints every ``.sql`` file
under ``tests/`` on its own and as the folders it sits in, the rule cases' folders again with
``--pg-version 10``, plus the bench's generated 300-file folder and 10,000-statement file,
each with ``--no-cache --format json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from lint_speed import generate, write_folder  # noqa: E402


def lint(paths: list[str], cwd: Path, *extra: str) -> object:
    """One ``pgsteady lint`` run's JSON report (or its exit code and stderr when it has none)."""
    done = subprocess.run(
        [sys.executable, "-m", "pgsteady", "lint", "--no-cache", "--format", "json", *extra,
         *paths], cwd=cwd, capture_output=True, text=True, check=False)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return {"exit": done.returncode, "stderr": done.stderr.strip()}
    return {"exit": done.returncode, "report": report}


def main() -> int:
    out: dict[str, object] = {}
    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("*.sql"))
    for name in files:
        out[f"file:{name}"] = lint([name], ROOT)
    for folder in sorted({Path(name).parent.as_posix() for name in files}):
        out[f"folder:{folder}"] = lint([folder], ROOT)
    # The rule cases on the oldest major lint takes a version gate for: a gate changes the
    # help, never whether a lock is reported.
    for folder in sorted({Path(name).parent.as_posix() for name in files
                          if name.startswith("tests/lint/cases/")}):
        out[f"folder@pg10:{folder}"] = lint([folder], ROOT, "--pg-version", "10")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        write_folder(base / "folder", 300)
        (base / "large.sql").write_text(generate(10_000))
        out["bench:folder"] = lint(["folder"], base)
        out["bench:large"] = lint(["large.sql"], base)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
