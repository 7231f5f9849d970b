"""Opening the report in a real headless Chromium: what a reader's browser would see.

Checks what a page that claims to be self-contained and phone-readable must get right — no
console errors, no network request besides the file itself, every chart drawn at a real size,
no sideways scroll at 390 px — and that it is safe to open a page built from someone else's
files: a Content-Security-Policy that runs no inline script but the page's own is in force,
nothing it blocked (a blocked handler means input leaked into markup), no dialog opened. It
saves a desktop and a phone screenshot next to the page.
Selenium drives Debian's ``chromium`` and ``chromium-driver``; nothing is downloaded.
"""

from __future__ import annotations

import base64
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgsteady._extras import needs
from pgsteady.errors import UsageError

PHONE_WIDTH = 390
DESKTOP_WIDTH = 1280


@dataclass
class BrowserCheck:
    """What the browser saw; ``problems`` is empty when the page passes."""

    console_errors: list[str] = field(default_factory=list)
    csp_violations: list[str] = field(default_factory=list)   # what the policy refused
    dialogs: list[str] = field(default_factory=list)          # alert(), confirm(), prompt()
    csp: str = ""                                             # the policy the page declares
    inline_script_blocked: bool | None = None                 # None: not probed (scripts off)
    requests: list[str] = field(default_factory=list)        # every URL the page asked for
    chart_sizes: list[tuple[float, float]] = field(default_factory=list)
    phone_overflow_px: float = 0.0
    text: str = ""
    screenshots: list[Path] = field(default_factory=list)
    scripts: bool = True

    def problems(self, page_url: str) -> list[str]:
        found = [f"console error: {e}" for e in self.console_errors]
        found += [f"Content Security Policy blocked: {e}" for e in self.csp_violations]
        found += [f"the page opened a dialog: {d}" for d in self.dialogs]
        found += _policy_problems(self.csp)
        if self.inline_script_blocked is False:
            found.append("an inline script added to the page ran: the Content-Security-Policy "
                         "is not in force")
        found += [f"network request: {u}" for u in self.requests
                  if u != page_url and not u.startswith("data:")]
        found += [f"chart {i} drawn at {w:.0f}x{h:.0f} px"
                  for i, (w, h) in enumerate(self.chart_sizes, 1) if w < 1 or h < 1]
        if self.phone_overflow_px > 0:
            found.append(f"the page scrolls sideways by {self.phone_overflow_px:.0f} px at "
                         f"{PHONE_WIDTH} px wide")
        return found


def _policy_problems(policy: str) -> list[str]:
    """What is missing from ``policy`` for a page built from untrusted files."""
    if not policy:
        return ["the page has no Content-Security-Policy"]
    directives = {d.split()[0].lower(): d.split()[1:] for d in policy.split(";") if d.split()}
    found = []
    if directives.get("default-src") != ["'none'"]:
        found.append("the Content-Security-Policy's default-src is not 'none'")
    script = directives.get("script-src", directives.get("default-src", []))
    loose = [s for s in script if not (s.startswith("'sha256-") or s == "'none'")]
    if loose:
        found.append(f"the Content-Security-Policy lets scripts run beyond the page's own "
                     f"by hash: {' '.join(loose)}")
    return found


# Run in the page as an inline script the policy does not know: it must be refused.
_PROBE = """
var probe = document.createElement('script');
probe.textContent = 'document.documentElement.dataset.cspProbe = "ran"';
document.head.appendChild(probe);
var ran = document.documentElement.dataset.cspProbe === 'ran';
probe.remove();
return ran;
"""


def _driver(scripts: bool) -> Any:
    with needs("report", "the browser check"):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
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
    # A dialog is dismissed and read from the log rather than failing the next command.
    options.set_capability("unhandledPromptBehavior", "dismiss")
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
        for entry in driver.get_log("browser"):
            if entry.get("level") != "SEVERE":
                continue
            # Chromium logs what a Content-Security-Policy refused with source "security".
            violations = (result.csp_violations if entry.get("source") == "security"
                          else result.console_errors)
            violations.append(entry["message"])
        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                result.requests.append(message["params"]["request"]["url"])
            elif message.get("method") == "Page.javascriptDialogOpening":
                params = message["params"]
                result.dialogs.append(f"{params.get('type')}({params.get('message')!r})")
        result.csp = " ".join(str(driver.execute_script(
            "return Array.from(document.querySelectorAll("
            "'meta[http-equiv=\"Content-Security-Policy\" i]'))"
            ".map(m => m.content).join('; ')")).split())
        if scripts:
            # Last, so the refusal it causes is not counted among the page's own problems.
            result.inline_script_blocked = not driver.execute_script(_PROBE)
    finally:
        driver.quit()
    return result
