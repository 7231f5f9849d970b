"""The built site as a person sees it, in Chromium: the nav, code at the column's edge, the
charts on a phone."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from pgsteady.report import browser

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None,
                                reason="needs chromium (apt-get install chromium)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site, built as `make docs` builds it and served on loopback; its base URL."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet", "--site-dir", str(out)],
                   cwd=ROOT, env=env, check=True, timeout=300, capture_output=True)
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def driver() -> Iterator[object]:
    chrome = browser._driver(scripts=True)
    try:
        yield chrome
    finally:
        chrome.quit()


def test_the_nav_has_lint_and_its_rules_each_where_they_say(site, driver):
    """"Lint" leads to the lint page and the rules have an entry of their own (the section's
    README made "Lint" lead to the rules and hid "Rules")."""
    driver.get(site)
    links = driver.execute_script(
        "return [...document.querySelectorAll('.md-nav--primary a.md-nav__link')]"
        ".map(a => [a.textContent.trim(), new URL(a.href).pathname]);")
    targets = {text: path for text, path in links if text}
    assert targets["Lint"] == "/lint/"
    assert targets["Lint rules"] == "/rules/"


@pytest.mark.parametrize("page", ["incidents/", "", "migrations/", "service/"])
def test_no_code_block_hides_text_behind_its_right_edge(site, driver, page):
    """At 1280 px every code block shows its lines whole (they wrap): the Incidents page's
    `fix:` lines were cut at the column's edge."""
    driver.set_window_size(1280, 900)
    driver.get(site + page)
    hidden = driver.execute_script(
        "return [...document.querySelectorAll('.md-typeset pre > code')]"
        ".filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent.slice(0, 60));")
    assert hidden == []


def test_the_home_chart_keeps_a_readable_size_on_a_phone(site, driver):
    """At 390 px the home page's chart keeps at least 720 px of width, in a box that scrolls
    sideways, rather than shrinking to an unreadable 350 px."""
    driver.set_window_size(390, 844)
    driver.get(site)
    width, scrolls = driver.execute_script(
        "const img = document.querySelector('img[src$=\"pool-drain.png\"]');"
        "const box = img.parentElement;"
        "return [img.getBoundingClientRect().width, getComputedStyle(box).overflowX];")
    assert width >= 720
    assert scrolls == "auto"
