"""`pgsteady watch`'s terminal view at a terminal's usual widths: nothing cut."""

from __future__ import annotations

import pytest
from rich.console import Console

from pgsteady.cli._watch_view import render

VIEW = {
    "at": "2026-12-05T01:00:00Z", "up": {"postgres": True, "pgbouncer": True}, "scrape_s": 0.012,
    "errors": {},
    "pools": [{"database": "gateway", "user": "app", "cl_active": 12, "cl_waiting": 340,
               "sv_active": 20, "sv_idle": 0, "sv_login": 1, "maxwait_s": 65.0,
               "refill_stuck_s": 12.5}],
    "not_ready_per_minute": 41.0,
    "postgres": {"connections_used": 57, "connections_usable": 97, "idle_in_transaction": 1,
                 "xmin_horizon_age_s": 25300.0,
                 "chains": [{"root": "dashboard-logs@api-7:4121", "root_pid": 4242,
                             "queued": 21, "longest_wait_s": 41.3,
                             "relations": {"public.orgs": 21}}],
                 "longest_transactions": [{"application_name": "dashboard-logs@api-7:4121",
                                           "pid": 4242, "state": "idle in transaction",
                                           "xact_age_s": 25300.0}]},
    "alerts": [], "alerts_quiet": 30, "alerts_no_data": 5,
}


def _screen(width: int) -> str:
    console = Console(width=width, record=True, no_color=True)
    with console.capture() as out:
        console.print(render(VIEW))
    return out.get()


@pytest.mark.parametrize("width", [80, 100, 160])
def test_no_header_is_cut_at_the_usual_widths(width):
    """At 80, 100 and 160 columns every pools header is there whole (on two lines where
    narrow) and nothing is cut with an ellipsis: at 80 they read 'cl_wa…'."""
    screen = _screen(width)
    assert "…" not in screen
    for word in ("active", "waiting", "idle", "login", "wait", "refill", "stuck"):
        assert word in screen, word
    assert max(len(line) for line in screen.splitlines()) <= width


def test_a_wide_terminal_shows_show_pools_own_names():
    """Where they fit, the headers are SHOW POOLS' own names on one line."""
    screen = _screen(160)
    for name in ("cl_active", "cl_waiting", "sv_active", "sv_idle", "sv_login", "maxwait"):
        assert name in screen, name
