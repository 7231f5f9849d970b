"""Opening the report in a real headless Chromium: what a reader's browser would see.

Checks what a page that claims to be self-contained and phone-readable must get right — no
console errors, no network request besides the file itself, every chart drawn at a real size,
no sideways scroll at 390 px — and saves a desktop and a phone screenshot next to the page.
Selenium drives Debian's ``chromium`` and ``chromium-driver``; nothing is downloaded.
"""

from __future__ import annotations

import base64
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgsteady.errors import UsageError

PHONE_WIDTH = 390
DESKTOP_WIDTH = 1280


@dataclass
class BrowserCheck:
    """What the browser saw; ``problems`` is empty when the page passes."""

    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)        # every URL the page asked for
    chart_sizes: list[tuple[float, float]] = field(default_factory=list)
    phone_overflow_px: float = 0.0
    text: str = ""
    screenshots: list[Path] = field(default_factory=list)
    scripts: bool = True

    def problems(self, page_url: str) -> list[str]:
        found = [f"console error: {e}" for e in self.console_errors]
        found += [f"network request: {u}" for u in self.requests
                  if u != page_url and not u.startswith("data:")]
        found += [f"chart {i} drawn at {w:.0f}x{h:.0f} px"
                  for i, (w, h) in enumerate(self.chart_sizes, 1) if w < 1 or h < 1]
        if self.phone_overflow_px > 0:
            found.append(f"the page scrolls sideways by {self.phone_overflow_px:.0f} px at "
                         f"{PHONE_WIDTH} px wide")
        return found


def _driver(scripts: bool) -> Any:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise UsageError("the browser check needs selenium: pip install 'pgsteady[report]'") \
            from None
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)
    if not chromium or not chromedriver:
        raise UsageError("the browser check needs Chromium and its driver: "
                         "apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-extensions", "--no-first-run",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                f"--window-size={DESKTOP_WIDTH},900"):
        options.add_argument(arg)
    if not scripts:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(chromedriver), options=options)


def _full_screenshot(driver: Any, width: int, path: Path) -> None:
    height = int(driver.execute_script(
        "return Math.ceil(document.documentElement.scrollHeight)"))
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": width, "height": min(height, 16000), "scale": 1}})
    path.write_bytes(base64.b64decode(shot["data"]))


def check_page(page: Path, *, screenshots: bool = True, scripts: bool = True) -> BrowserCheck:
    """Load ``page`` from a ``file://`` URL at desktop and phone widths and report what happened."""
    page = page.resolve()
    url = page.as_uri()
    result = BrowserCheck(scripts=scripts)
    driver = _driver(scripts)
    try:
        driver.set_page_load_timeout(30)
        driver.get(url)
        result.chart_sizes = [tuple(size) for size in driver.execute_script(
            "return Array.from(document.querySelectorAll('svg.chart'))"
            ".map(e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; })")]
        result.text = str(driver.execute_script("return document.body.innerText"))
        if screenshots:
            desktop = page.with_name(page.stem + "-desktop.png")
            _full_screenshot(driver, DESKTOP_WIDTH, desktop)
            result.screenshots.append(desktop)
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": PHONE_WIDTH, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        driver.get(url)
        result.phone_overflow_px = float(driver.execute_script(
            "return Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
            " - document.documentElement.clientWidth"))
        if screenshots:
            phone = page.with_name(page.stem + "-phone.png")
            _full_screenshot(driver, PHONE_WIDTH, phone)
            result.screenshots.append(phone)
        result.console_errors = [entry["message"] for entry in driver.get_log("browser")
                                 if entry.get("level") == "SEVERE"]
        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                result.requests.append(message["params"]["request"]["url"])
    finally:
        driver.quit()
    return result
