"""The report page in a real headless Chromium, built from a real (shortened) pool-drain run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from report_data import lock_queue, write

from pgsteady.report import build_report
from pgsteady.report.browser import check_page
from pgsteady.report.sections import verdict_of

pytestmark = pytest.mark.skipif(
    not (shutil.which("chromium") and shutil.which("chromedriver")),
    reason="needs Debian's chromium and chromium-driver (scripts/setup.sh installs them)")


@pytest.fixture(scope="module")
def pool_drain_json(tmp_path_factory):
    """A real pool-drain lab run, shortened: naive and steady, a 1 s burst in a 4 s run."""
    out = tmp_path_factory.mktemp("lab")
    done = subprocess.run(
        [sys.executable, "-m", "pgsteady", "lab", "pool-drain", "--strategy", "naive,steady",
         "--duration", "4s", "--burst", "30@1s-2s", "--ceiling-duration", "1s",
         "--json", str(out / "pool-drain.json")],
        capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    return out / "pool-drain.json"


@pytest.mark.lab
def test_demo_page_loads_clean_in_chromium_at_desktop_and_phone_width(pool_drain_json, tmp_path):
    """No console error, no request but the file, charts drawn, verdicts in words, no sideways
    scroll at 390 px; desktop and phone screenshots saved next to the page."""
    lq = write(tmp_path / "lock-queue.json", lock_queue())
    page = build_report([str(pool_drain_json), str(lq)], tmp_path / "index.html")
    seen = check_page(page)
    assert seen.problems(page.as_uri()) == []
    assert seen.requests and set(seen.requests) == {page.as_uri()}
    assert len(seen.chart_sizes) == 2 + 4
    assert all(w > 200 and h > 80 for w, h in seen.chart_sizes)
    for run in json.loads(pool_drain_json.read_text())["runs"]:
        assert f"{run['strategy']}\n" in seen.text or f"{run['strategy']}\t" in seen.text
        assert verdict_of(run) in seen.text
    assert "outage" in seen.text and "held" in seen.text
    assert [p.name for p in seen.screenshots] == ["index-desktop.png", "index-phone.png"]
    for shot in seen.screenshots:
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_page_reads_with_scripts_off(tmp_path):
    """With JavaScript disabled the charts still draw and the verdicts are still there."""
    page = build_report([str(write(tmp_path / "lq.json", lock_queue()))], tmp_path / "index.html")
    seen = check_page(page, screenshots=False, scripts=False)
    assert seen.problems(page.as_uri()) == []
    assert len(seen.chart_sizes) == 4 and all(w > 200 for w, _ in seen.chart_sizes)
    assert "outage" in seen.text and "held" in seen.text


def test_the_check_catches_requests_errors_and_sideways_scroll(tmp_path):
    """A page with an external image and a 900 px block fails the check on all three counts."""
    page = build_report([str(write(tmp_path / "lq.json", lock_queue()))], tmp_path / "index.html")
    page.write_text(page.read_text().replace(
        "<main>", '<main><img src="http://127.0.0.1:9/x.png" alt="">'
                  '<svg width="900" height="4"></svg>'))
    problems = check_page(page, screenshots=False).problems(page.as_uri())
    assert any(p.startswith("network request: http://127.0.0.1:9/x.png") for p in problems)
    assert any("Content Security Policy" in p for p in problems)
    assert any("scrolls sideways" in p for p in problems)
