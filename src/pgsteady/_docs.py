"""Where pgsteady's documentation lives.

Messages, ``--help`` texts and alert annotations link to pages of the docs site, never to a
path in the repository: the wheel does not ship ``docs/``. mkdocs.yml's ``site_url`` is
this base (a test keeps them equal); pages are served as directories (``outages.md`` at
``outages/``).
"""

from __future__ import annotations

DOCS_URL = "https://pgsteady.readthedocs.io/en/stable/"


def page(path: str) -> str:
    """The URL of the docs page at ``path`` (``docs/<path>.md``), e.g. ``page("outages")``."""
    return f"{DOCS_URL}{path.strip('/')}/"


OUTAGES = page("outages")  # the two outages and their mechanisms
INCIDENTS = page("incidents")  # the first minute of an incident: doctor, blockers, what to do
ALERTS = page("incidents/alerts")  # one section per alert: each rule's runbook_url
POOL_DRAIN = f"{OUTAGES}#pool-drain"  # 1: deadlines that drained a PgBouncer pool
LOCK_QUEUE = f"{OUTAGES}#lock-queue"  # 2: a migration stuck in a lock queue
