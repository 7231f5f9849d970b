"""The Incidents page (docs/incidents/index.md) as an on-call engineer reads it: the runbook
before the reference, and the pgbouncer.ini it recommends passing doctor's own checks with
the deadline it names."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pgsteady.cli import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "incidents" / "index.md"


def _ini_block(text: str, marker: str) -> dict[str, str]:
    """key = value lines of the ```ini block whose first line is ``marker``."""
    for block in re.findall(r"```ini\n(.*?)```", text, re.DOTALL):
        lines = block.splitlines()
        if lines and lines[0].strip() == marker:
            return {k.strip(): v.split("#")[0].strip() for k, _, v in
                    (line.partition("=") for line in lines[1:] if "=" in line)}
    raise AssertionError(f"no ini block starting {marker!r}")


def test_the_runbook_comes_before_the_reference():
    """'What to do, in order' is the page's first section, before any command output."""
    text = PAGE.read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert sections[0] == "What to do, in order"
    assert text.index("## What to do, in order") < text.index("```text")
    assert "--cancel" in text[:text.index("## The on-call role")]


def test_the_recommended_pgbouncer_ini_passes_doctor_at_50ms(pgsteady_stack, capsys):
    """A PgBouncer with the page's pgbouncer.ini gets no query-wait-timeout, min-pool-size or
    server-login-retry finding from doctor --app-deadline 50ms (the deadline the page names)."""
    text = PAGE.read_text(encoding="utf-8")
    settings = _ini_block(text, "# pgbouncer.ini")
    assert "--app-deadline 50ms" in text
    min_pool = int(settings.pop("min_pool_size"))
    lab = pgsteady_stack(pool_size=min_pool, min_pool_size=min_pool,
                         query_wait_timeout=float(settings.pop("query_wait_timeout")),
                         pgbouncer_settings=settings)
    code = main(["doctor", "--json", "--pgbouncer", lab.admin_dsn, "--samples", "1",
                 "--app-deadline", "50ms"])
    report = json.loads(capsys.readouterr().out)
    ids = {f["id"] for f in report["findings"]}
    assert code in (0, 1)
    assert not ids & {"pgbouncer-query-wait-timeout", "pgbouncer-min-pool-size",
                      "pgbouncer-server-login-retry"}, report["findings"]
