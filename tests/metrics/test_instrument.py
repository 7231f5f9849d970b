"""instrument(db): the client pool's metrics as Prometheus reads them, equal to db.stats()."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import pgsteady
from pgsteady import Database, DeadlineExceeded, Overloaded
from pgsteady.metrics import instrument


def scrape(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a real text-format scrape, keyed by name and sorted labels."""
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples, name, **labels):
    return samples[(name, tuple(sorted(labels.items())))]


def test_counters_match_stats_exactly_under_a_burst(pgsteady_stack):
    """A burst through a 2-connection PgBouncer pool with 50 ms deadlines and a small backlog:
    deadline-exceeded (per phase), overloaded and answered equal db.stats() exactly."""
    lab = pgsteady_stack(pool_size=2, proxy=True, connect_delay=0.05)
    registry = CollectorRegistry()
    with Database(lab.pooled_dsn(), pool_size=2, max_waiting=8, pooler="transaction",
                  service="scheduler") as db:
        instrument(db, registry, name="jobs")
        db.wait(10)
        stop = threading.Event()

        def caller() -> None:
            for _ in range(60):
                if stop.is_set():
                    return
                with contextlib.suppress(DeadlineExceeded, Overloaded):
                    db.fetchone("select pg_sleep(0.01)", deadline=0.05)

        threads = [threading.Thread(target=caller) for _ in range(30)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        stop.set()
        db.fetchone("select 1", deadline=10)   # let abandoned jobs settle; one more answer
        stats = db.stats()
        samples = scrape(registry)
    labels = {"service": "scheduler", "database": "jobs"}
    assert stats.deadline_exceeded > 0 and stats.overloaded > 0
    for phase in ("queued", "connecting", "running"):
        assert value(samples, "pgsteady_client_deadline_exceeded_total", phase=phase,
                     **labels) == getattr(stats, f"deadline_exceeded_{phase}")
    assert value(samples, "pgsteady_client_overloaded_total", **labels) == stats.overloaded
    assert value(samples, "pgsteady_client_answered_total", **labels) == stats.answered
    assert value(samples, "pgsteady_client_abandoned_completions_total", **labels) \
        == stats.abandoned_completions
    assert value(samples, "pgsteady_client_pool_size", **labels) == 2


def test_two_databases_and_a_closed_one_never_break_the_registry(pgsteady_database):
    """Two databases report side by side; a closed one stops reporting, and a new one under
    the same names takes its series over without a duplicate-series error."""
    registry = CollectorRegistry()
    first = Database(pgsteady_database.dsn, pool_size=1, service="api")
    other = Database(pgsteady_database.dsn, pool_size=3, service="worker")
    try:
        instrument(first, registry, name="main")
        instrument(other, registry, name="main")
        first.fetchone("select 1", deadline=10)
        samples = scrape(registry)
        assert value(samples, "pgsteady_client_pool_size", service="api", database="main") == 1
        assert value(samples, "pgsteady_client_pool_size", service="worker",
                     database="main") == 3
        assert value(samples, "pgsteady_client_answered_total", service="api",
                     database="main") == 1
        first.close()
        samples = scrape(registry)
        assert ("pgsteady_client_pool_size",
                (("database", "main"), ("service", "api"))) not in samples
        replacement = Database(pgsteady_database.dsn, pool_size=2, service="api")
        try:
            instrument(replacement, registry, name="main")
            instrument(replacement, registry, name="main")   # twice is harmless
            samples = scrape(registry)
            assert value(samples, "pgsteady_client_pool_size", service="api",
                         database="main") == 2
        finally:
            replacement.close()
    finally:
        other.close()


def test_default_database_label_comes_from_the_dsn_without_a_password(pgsteady_database):
    """Without a name, the label is host:port/dbname; no secret reaches the scrape."""
    registry = CollectorRegistry()
    dsn = pgsteady_database.dsn + " password=hunter2"
    with Database(dsn, pool_size=1, service="svc", open=False) as db:
        instrument(db, registry)
        text = generate_latest(registry).decode()
    assert f"/{pgsteady_database.name}" in text and "hunter2" not in text


@pytest.mark.parametrize("service", ["api"])
def test_async_database_is_instrumented_too(pgsteady_database, service):
    """An AsyncDatabase reports the same series, read from its stats at scrape time."""
    import asyncio

    from pgsteady import AsyncDatabase

    async def main() -> dict:
        registry = CollectorRegistry()
        async with AsyncDatabase(pgsteady_database.dsn, pool_size=1, service=service) as adb:
            instrument(adb, registry, name="db")
            await adb.fetchone("select 1", deadline=10)
            return scrape(registry)

    samples = asyncio.run(main())
    assert value(samples, "pgsteady_client_answered_total", service=service, database="db") == 1


def test_readme_instrument_snippet_passes_mypy_strict(tmp_path):
    """The docs' ``instrument(db, registry, name="app")`` block (Metrics and alerts) type-checks
    under mypy --strict in a user's file (the protocol's writable ``settings`` rejected
    Database)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "incidents" / "monitoring.md")
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    snippet = next(b for b in blocks if 'instrument(db, registry, name="app")' in b)
    (tmp_path / "service.py").write_text(snippet)
    src = Path(pgsteady.__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-version",
         f"{sys.version_info.major}.{sys.version_info.minor}", "service.py"],
        cwd=tmp_path, env={**os.environ, "MYPYPATH": str(src)},
        capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
