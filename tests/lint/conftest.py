"""Lint tests keep the cache's secret in the test session's folder, never in the user's
``~/.cache`` (a read-only home would otherwise turn every cache test into a miss)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _session_cache_secret(tmp_path_factory, monkeypatch):
    """XDG_CACHE_HOME points into the session's temporary folder (processes inherit it)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "xdg-cache"))
