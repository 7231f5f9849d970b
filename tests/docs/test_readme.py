"""Every code block in README.md and in the docs site's pages (docs/**/*.md) runs as written
(or says why it cannot).

Blocks run by default, chosen by their fence's language:

- ``python``: a script, in a fresh directory, with ``PGSTEADY_DSN`` set to a fresh database
  on the test session's PostgreSQL (a snippet that needs a server reads it from there);
- ``sh`` / ``bash``: a ``bash -euo pipefail`` script, same directory and environment;
- ``toml``: parsed;
- ``text``, ``console``, ``yaml``, ``ini``, ``conf``, ``json``, ``sql``: illustrative (output,
  or configuration and statements for other programs): not run.

A block that only includes a file of the repository (``--8<-- "tests/deploy/apps/..."``, the
snippets extension) is that file, run by its own tests. A block of any other language, or
none, fails the test: give it one. An HTML comment on the
line before a fence changes how it runs:

- ``<!-- readme-test: skip REASON -->``: not run (say why; e.g. it runs the whole suite);
- ``<!-- readme-test: pytest -->``: a pytest file, run with this package's plugin;
- ``<!-- readme-test: alembic-env -->``: an Alembic ``env.py``, run by ``alembic upgrade head``
  on a one-revision project; the revision must then be applied.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# The README and every page of the site: examples moved between them stay tested.
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
ALEMBIC_EXAMPLE = ROOT / "tests" / "migrate" / "alembic_example"
TIMEOUT = 180

_FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")
_MARK = re.compile(r"^<!--\s*readme-test:\s*([\w-]+)\s*(.*?)\s*-->\s*$")
_BY_LANGUAGE = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh",
                "toml": "toml",
                # output, or configuration and statements for other programs (ini: the
                # postgresql.conf lines tests/inspect parses and starts a server with)
                **dict.fromkeys(("text", "console", "yaml", "yml", "ini", "conf", "json", "sql"),
                                "not-run")}
_MODES = {"skip", "pytest", "alembic-env"}
_INCLUDE = re.compile(r'^--8<-- "([^"]+)"\s*$')


@dataclass(frozen=True)
class Snippet:
    """One fenced block: where it starts, its language, how it runs, and its code."""

    line: int
    language: str
    mode: str
    reason: str
    code: str
    page: str = "README.md"

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}-{self.language or 'none'}-{self.mode}"


def snippets(text: str, page: str = "README.md") -> list[Snippet]:
    """The fenced blocks of a Markdown text, each with its run mode."""
    found: list[Snippet] = []
    lines = text.splitlines()
    mark: tuple[str, str] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if m := _MARK.match(line.strip()):
            mark = (m[1], m[2])
        elif m := _FENCE.match(line):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")),
                       len(lines))
            language = m[1].lower()
            mode, reason = mark or (_BY_LANGUAGE.get(language, "unknown"), "")
            body = [b for b in lines[i + 1:end] if b.strip()]
            if body and all(_INCLUDE.match(b) for b in body):
                # The page shows a file of the repository (the snippets extension, which
                # checks the path): that file is run by its own tests (tests/deploy).
                mode, reason = "not-run", "an included file, run by its own tests"
            found.append(Snippet(i + 1, language, mode, reason,
                                 "\n".join(lines[i + 1:end]) + "\n", page))
            mark = None
            i = end
        elif line.strip():
            mark = None  # a marker belongs to the fence right after it
        i += 1
    return found


SNIPPETS = [snippet for page in PAGES
            for snippet in snippets(page.read_text(), str(page.relative_to(ROOT)))]


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> None:
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=TIMEOUT, check=False)
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"


@pytest.fixture
def snippet_env(pgsteady_database, pgsteady_postgres, tmp_path) -> dict[str, str]:
    """The environment a README snippet runs in: a fresh database as ``PGSTEADY_DSN``."""
    bindir = str(Path(sys.executable).parent)
    return {**os.environ, "PGSTEADY_DSN": pgsteady_database.dsn,
            "PGPASSFILE": str(pgsteady_postgres.passfile),
            "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
            "HOME": str(tmp_path)}


def test_the_extractor_finds_every_block_and_knows_how_to_run_it():
    """Every block has a language or a marker this test knows; skips give a reason."""
    for page in PAGES:
        fences = [line for line in page.read_text().splitlines() if line.startswith("```")]
        found = [s for s in SNIPPETS if s.page == str(page.relative_to(ROOT))]
        assert len(fences) == 2 * len(found), f"{page}: a fence is not closed"
    for snippet in SNIPPETS:
        assert snippet.mode in {*_BY_LANGUAGE.values(), *_MODES}, (
            f"{snippet.id}: give the block a language (python and sh run, toml is parsed, "
            f"text, yaml, ini, json, sql... are not run) or a marker: <!-- readme-test: skip REASON -->, "
            f"<!-- readme-test: pytest -->, <!-- readme-test: alembic-env -->")
        if snippet.mode == "skip":
            assert snippet.reason, f"{snippet.id}: say why it is skipped"
    assert any(s.mode == "python" for s in SNIPPETS)


# Blocks that are not run (output, other programs' configuration, skips) are only checked by
# the extractor's test above: a skip apiece would bury the report.
@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if s.mode not in ("not-run", "skip")],
                         ids=lambda s: s.id)
def test_readme_snippet_runs(snippet: Snippet, request: pytest.FixtureRequest,
                             tmp_path: Path) -> None:
    """The block runs as written: scripts exit 0, TOML parses, Alembic applies, tests pass."""
    if snippet.mode in ("not-run", "skip", "unknown"):
        pytest.skip(snippet.reason or f"{snippet.language or 'no language'}: not run")
    if snippet.mode == "toml":
        tomllib.loads(snippet.code)
        return
    env = request.getfixturevalue("snippet_env")
    if snippet.mode == "python":
        (tmp_path / "snippet.py").write_text(snippet.code)
        _run([sys.executable, "snippet.py"], tmp_path, env)
    elif snippet.mode == "sh":
        (tmp_path / "snippet.sh").write_text(snippet.code)
        _run(["bash", "-euo", "pipefail", "snippet.sh"], tmp_path, env)
    elif snippet.mode == "pytest":
        (tmp_path / "test_snippet.py").write_text(snippet.code)
        _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
              "test_snippet.py"], tmp_path, env)
    elif snippet.mode == "alembic-env":
        _run_alembic_env(snippet.code, tmp_path, env)


def _run_alembic_env(env_py: str, project: Path, env: dict[str, str]) -> None:
    """A one-revision Alembic project with this env.py; ``upgrade head`` must apply it."""
    info = conninfo_to_dict(env["PGSTEADY_DSN"])
    (project / "versions").mkdir()
    (project / "env.py").write_text(env_py)
    shutil.copy(ALEMBIC_EXAMPLE / "script.py.mako", project / "script.py.mako")
    shutil.copy(ALEMBIC_EXAMPLE / "versions" / "0001_create_orgs.py", project / "versions")
    (project / "alembic.ini").write_text(
        "[alembic]\nscript_location = %(here)s\n"
        f"sqlalchemy.url = postgresql+psycopg://{info['user']}@{info['host']}:{info['port']}"
        f"/{info['dbname']}\n")
    _run([sys.executable, "-m", "alembic", "-c", str(project / "alembic.ini"), "upgrade",
          "head"], project, env)
    with psycopg.connect(env["PGSTEADY_DSN"]) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        orgs = conn.execute("SELECT count(*) FROM orgs").fetchone()
    assert row == ("0001",) and orgs == (50,)
