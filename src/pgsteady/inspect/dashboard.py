"""A Grafana dashboard for pgsteady's metrics, generated from their definitions: one panel per
metric, in rows by concern (client pools, deadlines, lock queue, PgBouncer, migrations,
probes), so a metric added to a list below or to the exporter's ``METRICS`` gets its panel.

``pgsteady alerts --format grafana`` prints it (Grafana's dashboard JSON model, a Prometheus
data source chosen by a ``datasource`` variable).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from pgsteady.inspect.exporter import METRICS, MetricDef
from pgsteady.inspect.probe import METRICS as PROBE

_CLIENT = ("service", "database")
CLIENT_METRICS: tuple[MetricDef, ...] = (
    MetricDef("pgsteady_client_pool_size", "gauge", _CLIENT, "connections the pool may hold"),
    MetricDef("pgsteady_client_pool_in_use", "gauge", _CLIENT, "connections running a job now"),
    MetricDef("pgsteady_client_queued", "gauge", _CLIENT, "jobs waiting for a connection"),
    MetricDef("pgsteady_client_answered_total", "counter", _CLIENT,
              "calls answered within their deadline"),
    MetricDef("pgsteady_client_deadline_exceeded_total", "counter", (*_CLIENT, "phase"),
              "calls whose deadline passed, by phase (queued, connecting, running)"),
    MetricDef("pgsteady_client_overloaded_total", "counter", _CLIENT,
              "calls refused at once: the backlog was full"),
    MetricDef("pgsteady_client_abandoned_completions_total", "counter", _CLIENT,
              "jobs that completed after their caller had gone"),
    MetricDef("pgsteady_client_dropped_before_start_total", "counter", _CLIENT,
              "jobs dropped untouched: their caller had gone before they started"),
    MetricDef("pgsteady_client_failed_total", "counter", _CLIENT,
              "calls that failed (connection or statement errors)"),
)
"""What :func:`pgsteady.metrics.instrument` exports (a test scrapes it and compares)."""

MIGRATION_METRICS: tuple[MetricDef, ...] = tuple(
    MetricDef(f"pgsteady_migration_last_run_{name}", "gauge", (), text) for name, text in (
        ("success", "1 if the last pgsteady migrate run applied everything, else 0"),
        ("duration_seconds", "how long the last run took"),
        ("tries", "tries the last run spent on the migrations it applied"),
        ("applied", "migrations the last run applied"),
        ("pending", "migrations still pending after the last run"),
        ("timestamp_seconds", "when the last run ended (Unix time)")))
"""What ``pgsteady migrate --metrics-file`` writes (a test reads one back and compares)."""

PROBE_METRICS: tuple[MetricDef, ...] = tuple(
    MetricDef(name, "gauge", ("probe", "check"), text) for name, text in PROBE)

ALL_METRICS: tuple[MetricDef, ...] = (*CLIENT_METRICS, *METRICS, *MIGRATION_METRICS,
                                      *PROBE_METRICS)

_DEADLINES = ("pgsteady_client_deadline_exceeded_total",
              "pgsteady_client_abandoned_completions_total",
              "pgsteady_client_dropped_before_start_total")
ROWS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("Deadlines", lambda name: name in _DEADLINES),
    ("Client pools", lambda name: name.startswith("pgsteady_client_")),
    ("PgBouncer (refill, not-ready closures)", lambda name: "_pgbouncer_" in name),
    ("Migrations", lambda name: name.startswith("pgsteady_migration_")),
    ("Probes and exporter", lambda name: name.startswith(("pgsteady_probe_", "pgsteady_up"))),
    ("PostgreSQL: lock queue, transactions, connections", lambda name: True),
)
"""A metric goes to the first row whose test it passes."""
ORDER = ("Client pools", "Deadlines", "PostgreSQL: lock queue, transactions, connections",
         "PgBouncer (refill, not-ready closures)", "Migrations", "Probes and exporter")
"""The rows top to bottom."""

WIDTH, HEIGHT = 8, 7  # three panels a row on Grafana's 24-column grid


def query(metric: MetricDef) -> tuple[str, str]:
    """The panel's PromQL and legend: a gauge as it is, a counter as a per-second rate; both
    keep the instance (the replica or the exporter) and the metric's own labels."""
    labels = ("instance", *metric.labels)
    legend = " ".join("{{" + label + "}}" for label in labels)
    if metric.kind == "counter":
        return (f"sum by ({', '.join(labels)}) (rate({metric.name}[$__rate_interval]))", legend)
    return metric.name, legend


def _panel(metric: MetricDef, panel_id: int, x: int, y: int) -> dict[str, Any]:
    expr, legend = query(metric)
    unit = ("s" if metric.name.endswith("_seconds") and "timestamp" not in metric.name
            else "dateTimeAsIso" if "timestamp" in metric.name
            else "percentunit" if metric.name.endswith("_ratio")
            else "ops" if metric.kind == "counter" else "short")
    return {
        "id": panel_id, "type": "timeseries", "title": metric.name.removeprefix("pgsteady_"),
        "description": metric.help, "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": WIDTH, "h": HEIGHT},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": "A", "expr": expr, "legendFormat": legend,
                     "datasource": {"type": "prometheus", "uid": "${datasource}"}}],
    }


def dashboard(metrics: Iterable[MetricDef] = ALL_METRICS) -> dict[str, Any]:
    """Grafana's dashboard JSON model: a row per concern, a time series panel per metric."""
    rows: dict[str, list[MetricDef]] = {title: [] for title in ORDER}
    for metric in metrics:
        title = next(title for title, belongs in ROWS if belongs(metric.name))
        rows[title].append(metric)
    panels: list[dict[str, Any]] = []
    y = 0
    for title, members in rows.items():
        if not members:
            continue
        panels.append({"id": len(panels) + 1, "type": "row", "title": title,
                       "collapsed": False, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
                       "panels": []})
        y += 1
        for i, metric in enumerate(members):
            panels.append(_panel(metric, len(panels) + 1, (i % 3) * WIDTH,
                                 y + (i // 3) * HEIGHT))
        y += -(-len(members) // 3) * HEIGHT
    return {
        "title": "pgsteady", "uid": "pgsteady", "tags": ["pgsteady", "postgresql", "pgbouncer"],
        "schemaVersion": 39, "version": 1, "editable": True, "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "description": "Generated by `pgsteady alerts --format grafana`: one panel per metric "
                       "of docs/reference/metrics.md.",
        "templating": {"list": [{"name": "datasource", "type": "datasource",
                                 "query": "prometheus", "label": "Prometheus"}]},
        "panels": panels,
    }


def dashboard_json() -> str:
    return json.dumps(dashboard(), indent=1) + "\n"
