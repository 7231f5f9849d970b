"""A report built from hostile files: their strings show as text and never become markup."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from html.parser import HTMLParser

import pytest
from report_data import PAYLOADS, lock_queue, write, write_hostile_inputs

from pgsteady.report import build_report
from pgsteady.report.browser import check_page
from pgsteady.report.page import SCRIPT, STYLE
from pgsteady.report.safe import KINDS, html_id

needs_chromium = pytest.mark.skipif(
    not (shutil.which("chromium") and shutil.which("chromedriver")),
    reason="needs Debian's chromium and chromium-driver (scripts/setup.sh installs them)")

TAGS = {"html", "head", "meta", "title", "style", "body", "main", "h1", "h2", "h3", "p", "code",
        "a", "small", "nav", "ul", "li", "section", "div", "table", "caption", "thead", "tbody",
        "tr", "th", "td", "span", "strong", "em", "dl", "dt", "dd", "figure", "figcaption",
        "details", "summary", "script", "svg", "defs", "pattern", "line", "rect", "text", "g",
        "polyline"}
# Classes the page's own code writes: the stylesheet's, the palette's, and two unstyled hooks.
CLASSES = set(re.findall(r"\.([a-z][a-z0-9-]*)", STYLE)) | KINDS | {"heatmap", "tick"}
SAFE_ID = re.compile(r"[a-z0-9-]+")


class Audit(HTMLParser):
    """Everything in a page that could run or style something, and all its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.inline: dict[str, list[str]] = {"script": [], "style": []}
        self.text: list[str] = []
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in self.inline:
            self._open = tag
            self.inline[tag].append("")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        self._open = None

    def handle_data(self, data: str) -> None:
        if self._open:
            self.inline[self._open][-1] += data
        else:
            self.text.append(data)


def _audit(html: str) -> Audit:
    audit = Audit()
    audit.feed(html)
    audit.close()
    return audit


def _hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def test_hostile_strings_in_every_field_show_as_text_and_never_as_markup(tmp_path):
    """Payloads in names, labels, settings, versions and file names add no tag, handler,
    style, link or id of their own, and each still reads as text on the page."""
    inputs = write_hostile_inputs(tmp_path / "in")
    html = build_report([str(tmp_path / "in")], tmp_path / "index.html").read_text()
    audit = _audit(html)
    assert {tag for tag, _ in audit.tags} <= TAGS
    attrs = [(name, value or "") for _, found in audit.tags for name, value in found.items()]
    assert [a for a in attrs if a[0].startswith("on") or a[0] in ("style", "src")] == []
    ids = [value for name, value in attrs if name == "id"]
    assert all(SAFE_ID.fullmatch(i) for i in ids) and len(ids) == len(set(ids))
    for name, value in attrs:
        if name in ("href", "aria-labelledby") or value.startswith("url("):
            # Fragment links, a chart's title and its hatch point only at the page's own ids.
            assert value.removeprefix("#").removeprefix("url(#").removesuffix(")") in ids
        elif name == "id":
            continue                                   # checked above: [a-z0-9-] only
        elif name == "class":
            assert set(value.split()) <= CLASSES, value
        else:
            assert not re.search(r'alert|javascript:|url\(|expression|[<>"]', value), value
    assert audit.inline == {"script": [SCRIPT], "style": [STYLE]}
    text = "".join(audit.text)
    for payload in PAYLOADS:
        assert payload in text
    assert inputs[-1].name in text


def test_the_policy_allows_the_pages_own_script_and_style_by_hash_only(tmp_path):
    """The page's CSP: nothing by default, and its one script and one style named by hash."""
    html = build_report([str(write(tmp_path / "lq.json", lock_queue()))],
                        tmp_path / "index.html").read_text()
    audit = _audit(html)
    policy = next(found["content"] for tag, found in audit.tags
                  if tag == "meta" and found.get("http-equiv") == "Content-Security-Policy")
    directives = {d.split()[0]: d.split()[1:] for d in (policy or "").split(";")}
    assert directives["default-src"] == ["'none'"]
    assert directives["script-src"] == [_hash(s) for s in audit.inline["script"]]
    assert directives["style-src"] == [_hash(s) for s in audit.inline["style"]]
    assert "unsafe" not in policy


def test_ids_from_names_are_slugs_and_names_that_slug_alike_stay_apart():
    """A clean name is its own id; others keep only [a-z0-9-] plus a hash of the original."""
    assert html_id("s1", "lock-queue", "lab") == "s1-lock-queue-lab"
    made = [html_id("s1", name) for name in (*PAYLOADS, "A b", "a-b", "a b", "", "x" * 80)]
    assert all(SAFE_ID.fullmatch(i) and len(i) <= 49 for i in made)
    assert len(set(made)) == len(made)


@needs_chromium
def test_hostile_page_runs_nothing_in_chromium_and_its_policy_is_in_force(tmp_path):
    """Chromium opens the hostile page with no console error, nothing blocked, no dialog, an
    injected inline script refused, and the payloads on screen as text."""
    write_hostile_inputs(tmp_path / "in")
    page = build_report([str(tmp_path / "in")], tmp_path / "index.html")
    seen = check_page(page, screenshots=False)
    assert seen.problems(page.as_uri()) == []
    assert seen.csp_violations == [] and seen.dialogs == []
    assert seen.inline_script_blocked is True and "default-src 'none'" in seen.csp
    assert PAYLOADS[0] in seen.text and PAYLOADS[3] in seen.text


@needs_chromium
def test_the_check_fails_on_anything_the_policy_blocks(tmp_path):
    """A script, an event handler and a style attribute slipped into a page are each refused
    by its CSP and each reported as a problem."""
    page = build_report([str(write(tmp_path / "lq.json", lock_queue()))], tmp_path / "index.html")
    page.write_text(page.read_text().replace(
        "<main>", '<main><script>alert(1)</script><img src="data:," onerror="alert(2)">'
                  '<b style="color:red">x</b>'))
    seen = check_page(page, screenshots=False)
    blocked = [p for p in seen.problems(page.as_uri())
               if p.startswith("Content Security Policy blocked")]
    assert any("inline script" in p for p in blocked)
    assert any("inline event handler" in p for p in blocked)
    assert any("inline style" in p for p in blocked)
    assert seen.dialogs == []


@needs_chromium
def test_the_check_fails_a_page_whose_policy_lets_script_run(tmp_path):
    """With 'unsafe-inline' in its policy, an injected handler runs: the check reports the
    dialog, the loose policy and the probe script that ran, and does not crash."""
    page = build_report([str(write(tmp_path / "lq.json", lock_queue()))], tmp_path / "index.html")
    html = re.sub(r"script-src [^;]+;", "script-src 'unsafe-inline';", page.read_text())
    page.write_text(html.replace("<main>", '<main><img src="x.png" onerror="alert(2)">'))
    problems = check_page(page, screenshots=False).problems(page.as_uri())
    assert "the page opened a dialog: alert('2')" in problems
    assert any("scripts run beyond the page's own by hash: 'unsafe-inline'" in p
               for p in problems)
    assert any("Content-Security-Policy is not in force" in p for p in problems)
