"""A migration run's outcome in node_exporter's textfile format, so "failed or slow
migrations" can page (the migration outage): ``pgsteady migrate --metrics-file PATH``.

Written atomically (prometheus-client writes a temporary file beside ``PATH`` and renames it),
so node_exporter never reads half a file; written on success and on failure alike.
"""

from __future__ import annotations

import time
from pathlib import Path

from pgsteady._extras import needs
from pgsteady.errors import UsageError

with needs("metrics", "--metrics-file (the migration's textfile metrics)"):
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile


def write_run(path: str | Path, *, success: bool, seconds: float, tries: int,
              pending: int | None, applied: int) -> None:
    """Replace ``path`` with the last run's metrics; ``pending`` None: unknown (left out)."""
    registry = CollectorRegistry()

    def gauge(name: str, help_text: str, value: float) -> None:
        Gauge(f"pgsteady_migration_{name}", help_text, registry=registry).set(value)

    gauge("last_run_success", "1 if the last pgsteady migrate run applied everything, else 0",
          1.0 if success else 0.0)
    gauge("last_run_duration_seconds", "how long the last run took", seconds)
    gauge("last_run_tries", "tries the last run spent on the migrations it applied", tries)
    gauge("last_run_applied", "migrations the last run applied", applied)
    gauge("last_run_timestamp_seconds", "when the last run ended (Unix time)", time.time())
    if pending is not None:
        gauge("last_run_pending", "migrations still pending after the last run", pending)
    write_to_textfile(str(check_path(path)), registry)


def check_path(path: str | Path) -> Path:
    """Refuse, before anything runs, a path whose folder does not exist."""
    target = Path(path)
    if not target.parent.is_dir() or target.is_dir():
        raise UsageError(f"--metrics-file {path}: not a file in an existing folder; point it "
                         "at a .prom file in node_exporter's --collector.textfile.directory")
    return target
