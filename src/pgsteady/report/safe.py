"""Putting values from the input files into the page without letting them become markup.

Result files are often sent by someone else, so every string in them is untrusted: text and
attribute values go through :func:`text` (``html.escape`` with quotes), ids and fragment links
are :func:`html_id` slugs that can hold nothing but ``[a-z0-9-]``, and CSS classes come only
from the code's own palette (:data:`KINDS`), never from input. The page's Content-Security-
Policy (:func:`content_security_policy`) is the second line: it runs only the page's own inline
script and style, named by hash.
"""

from __future__ import annotations

import base64
import hashlib
import re
from html import escape
from typing import Any, Literal, get_args

# Every CSS class a chart series, band, marker or legend key may carry; the stylesheet in
# page.py draws each one.
Kind = Literal["good", "good2", "good3", "bad-hatch", "muted", "line", "line-bad", "line-warn",
               "band", "band2", "marker", "marker-bad", "level"]
KINDS: frozenset[str] = frozenset(get_args(Kind))

_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_SLUG_LENGTH = 40


def text(value: Any) -> str:
    """``value`` as HTML text or a quoted attribute value: ``& < > " '`` escaped."""
    return escape(str(value), quote=True)


def html_id(*parts: Any) -> str:
    """An id (and ``#fragment``) built from ``parts``, safe in any attribute or CSS ``url()``.

    Only ``[a-z0-9-]`` survives; when that loses anything (case, punctuation, length) a short
    hash of the original is appended, so two names that slug alike still get two ids.
    """
    raw = "-".join(str(p) for p in parts)
    slug = _NOT_SLUG.sub("-", raw.lower()).strip("-")[:_SLUG_LENGTH].strip("-") or "x"
    if slug == raw:
        return slug
    return f"{slug}-{hashlib.sha256(raw.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def css_class(kind: str) -> str:
    """``kind`` if it is one of the palette's classes; anything else is a bug in this package."""
    if kind not in KINDS:
        raise ValueError(f"{kind!r} is not a report palette class")
    return kind


def sha256_source(source: str) -> str:
    """A CSP hash source (``'sha256-…'``) for an inline ``<script>`` or ``<style>`` body."""
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def content_security_policy(*, scripts: tuple[str, ...], styles: tuple[str, ...]) -> str:
    """Nothing from anywhere, except these exact inline scripts and styles.

    No ``'unsafe-inline'``: an event-handler attribute, ``javascript:`` URL, injected
    ``<script>`` or ``style`` attribute is refused even if escaping ever misses one.
    """
    return ("default-src 'none'; "
            f"script-src {' '.join(sha256_source(s) for s in scripts)}; "
            f"style-src {' '.join(sha256_source(s) for s in styles)}; "
            "base-uri 'none'; form-action 'none'")
