"""The docs site builds offline with ``mkdocs build --strict``, every page is reachable, and
the pages generated from code are current."""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pgsteady._docs import ALERTS, DOCS_URL
from pgsteady.inspect.alerts import RUNBOOK_BASE

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


class _Loader(yaml.SafeLoader):
    """mkdocs.yml as data: material's ``!!python/name:`` tags (if any) read as strings."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/",
                              lambda loader, suffix, node: f"{suffix}")


def _config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)  # noqa: S506 -- a SafeLoader subclass
    return config


def _nav_pages(nav: Any) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_nav_pages(item) for item in nav))
    if isinstance(nav, dict):
        return set().union(*(_nav_pages(value) for value in nav.values()))
    return set()


def test_mkdocs_build_strict_passes_offline(tmp_path):
    """`mkdocs build --strict` (what `make docs` runs) succeeds: no broken link or anchor, no
    page outside the nav that is not deliberately left out; no plugin may fetch anything."""
    config = _config()
    assert [p if isinstance(p, str) else next(iter(p)) for p in config["plugins"]] == ["search"]
    assert config["theme"].get("font") is False  # no request to a font CDN
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                          "--site-dir", str(tmp_path / "site")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (tmp_path / "site" / "incidents" / "alerts" / "index.html").is_file()
    assert "Version policy" in (tmp_path / "site" / "changelog" / "index.html").read_text()


def test_every_page_is_in_the_nav_or_deliberately_left_out():
    """Each docs/**/*.md is in mkdocs.yml's nav, or a generated rule page reached from the
    rules' index; nav entries name pages that exist."""
    config = _config()
    in_nav = _nav_pages(config["nav"])
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert in_nav <= pages, f"the nav names missing pages: {sorted(in_nav - pages)}"
    assert config["not_in_nav"].split() == ["/rules/*.md"]
    rules_index = (DOCS / "rules" / "README.md").read_text()
    for page in sorted(pages - in_nav):
        assert page.startswith("rules/"), f"{page}: put it in mkdocs.yml's nav"
        assert f"]({Path(page).name})" in rules_index, f"{page}: not linked from rules/README.md"


def test_the_site_url_is_the_one_messages_link_to():
    """mkdocs.yml's site_url is pgsteady._docs.DOCS_URL, and the alerts' runbook_url base is
    the alerts page there (docs/incidents/alerts.md, served at incidents/alerts/)."""
    assert _config()["site_url"] == DOCS_URL
    assert RUNBOOK_BASE == ALERTS == f"{DOCS_URL}incidents/alerts/"
    assert (DOCS / "incidents" / "alerts.md").is_file()


def test_the_cli_reference_is_current(monkeypatch):
    """docs/reference/cli.md is what scripts/cli_reference.py writes from today's parser."""
    monkeypatch.setenv("COLUMNS", "100")
    script = runpy.run_path(str(ROOT / "scripts" / "cli_reference.py"))
    assert (DOCS / "reference" / "cli.md").read_text() == script["page"](), (
        "regenerate: python scripts/cli_reference.py")


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.png")))
def test_every_picture_is_shown_somewhere(page):
    """Each PNG in docs/ is on some page (a picture nobody shows is dead weight)."""
    assert any(page in p.read_text() for p in DOCS.rglob("*.md")), page


def test_the_readme_is_short_and_its_links_reach_pages():
    """README.md stays an introduction (at most 250 lines), and each docs-site link in it (and
    in the messages' constants) names a page that exists in docs/."""
    import re

    from pgsteady import _docs

    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    urls = set(re.findall(re.escape(DOCS_URL) + r"[\w/.-]*", readme))
    urls |= {v for k, v in vars(_docs).items() if k.isupper() and isinstance(v, str)}
    for url in sorted(urls):
        path = url[len(DOCS_URL):].split("#")[0].strip("/")
        candidates = ([DOCS / "index.md"] if not path else
                      [DOCS / f"{path}.md", DOCS / path / "index.md", DOCS / path / "README.md"])
        assert any(c.is_file() for c in candidates), f"{url}: no page in docs/"


def test_pages_speak_of_the_outages_not_of_the_seed():
    """What a reader sees (README, the site's pages, the CLI's help) names the outage or the
    write-up, never "the seed": that is the project's own word for its source documents."""
    wording = re.compile(r"\bthe seed(?:'s)?\b(?! \d)", re.IGNORECASE)
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            assert not wording.search(line), f"{page.relative_to(ROOT)}:{number}: {line}"
