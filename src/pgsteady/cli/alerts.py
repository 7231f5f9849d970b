"""``pgsteady alerts``: the Prometheus rules file for both outages' warning signs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pgsteady.errors import EXIT_OK


def register(verbs: Any) -> None:
    alerts = verbs.add_parser(
        "alerts", help="print Prometheus alert rules for pgsteady's metrics",
        description="Print a Prometheus rules file: one group per concern (client pools, "
                    "PostgreSQL, PgBouncer, migrations, deploys, the exporter), each rule with a "
                    "`for`, a severity label and summary/description/runbook annotations that "
                    "say what to run. Thresholds and durations: defaults, overridden by "
                    "[tool.pgsteady.alerts] in pyproject.toml or by --config FILE.")
    alerts.add_argument("--format", choices=["prometheus", "prometheus-operator", "markdown",
                                             "grafana"], default="prometheus",
                        help="prometheus: a rules file for rule_files (default); "
                             "prometheus-operator: the same rules as a PrometheusRule manifest; "
                             "markdown: the runbook page each rule's runbook_url points at; "
                             "grafana: a dashboard (JSON) of pgsteady's metrics")
    alerts.add_argument("--name", default="pgsteady",
                        help="prometheus-operator: the PrometheusRule's name (default pgsteady)")
    alerts.add_argument("--namespace", help="prometheus-operator: its namespace")
    alerts.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                        help="prometheus-operator: a label its ruleSelector matches, e.g. "
                             "release=kube-prometheus-stack (repeatable)")
    alerts.add_argument("--config", metavar="FILE",
                        help="TOML with thresholds and `for` durations, e.g. lock_queue_length = "
                             "5, lock_queue_length_for = \"30s\"")
    alerts.add_argument("--list", action="store_true",
                        help="list the configurable keys and their defaults instead")
    alerts.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pgsteady.errors import UsageError
    from pgsteady.inspect.alerts import (
        DEFAULTS,
        load_config,
        prom_duration,
        prometheus_operator_rules,
        prometheus_rules,
        runbook_markdown,
    )

    config = load_config(Path(args.config) if args.config else None)
    if args.list:
        for key, value in config.values.items():
            shown = prom_duration(value) if key.endswith("_for") else f"{value:g}"
            default = DEFAULTS[key]
            note = "" if value == default else "  (default " + (
                prom_duration(default) if key.endswith("_for") else f"{default:g}") + ")"
            print(f"{key} = {shown}{note}", file=sys.stdout)
        return EXIT_OK
    if args.format == "prometheus-operator":
        labels = {}
        for item in args.label:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise UsageError(f"--label {item!r} is not KEY=VALUE; write it like "
                                 "release=kube-prometheus-stack")
            labels[key] = value
        sys.stdout.write(prometheus_operator_rules(config, name=args.name,
                                                   namespace=args.namespace, labels=labels))
        return EXIT_OK
    if args.format == "grafana":
        from pgsteady.inspect.dashboard import dashboard_json

        sys.stdout.write(dashboard_json())
        return EXIT_OK
    render = runbook_markdown if args.format == "markdown" else prometheus_rules
    sys.stdout.write(render(config))
    return EXIT_OK
