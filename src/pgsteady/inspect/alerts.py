"""Alert rules for both outages: one definition, printed as Prometheus rules and evaluated
in-process by ``pgsteady watch``.

Seed 002's team was paged late because nobody had written rules with the right ``for``
durations; seed 000's pool drain shows in not-ready closures and a pool stuck refilling. Each
rule here names a pgsteady metric, a comparison against a configurable threshold and a
configurable ``for``; the PromQL and the in-process evaluation are both derived from that one
definition, so the terminal and the pager never disagree.

Thresholds and durations come from defaults, overridable by a TOML file (``--config``) or
``[tool.pgsteady.alerts]`` in pyproject.toml::

    [tool.pgsteady.alerts]
    lock_queue_length = 5          # a threshold: a number
    lock_queue_for = "30s"         # a `for` duration: "30s", "5m", "1h" or seconds

An unknown key or a negative value is a usage error (exit 2): a typo must not turn a page off,
and neither may a share written as a percentage (``client_pool_used = 70`` can never fire).

Every aggregation keeps ``instance`` and ``job`` (the exporter or service a series came from),
so with several databases a page says which one fired; each rule carries a ``runbook_url`` to
its section of the alerts page (``runbook_base`` in the config moves it to your own copy).
"""

from __future__ import annotations

import difflib
import json
import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgsteady._docs import ALERTS, INCIDENTS, LOCK_QUEUE, POOL_DRAIN
from pgsteady.errors import UsageError

RUNBOOK = f"the first minute of an incident, {INCIDENTS}"
# Where each rule's runbook_url points: the alerts page of the docs, one section per alert.
RUNBOOK_BASE = ALERTS
WHERE = ("instance", "job")  # the labels that say which exporter/database a series is from
# A client pool's series: the replica (instance) whose callers wait, and which pool it is.
CLIENT = (*WHERE, "service", "database")


@dataclass(frozen=True)
class Rule:
    """One alert. ``expr`` is built from ``kind``:

    - ``max``: ``max by (by) (metric) OP threshold``
    - ``ratio``: ``sum by (by) (metric) / sum by (by) (denominator) OP threshold``
    - ``per_minute``: ``sum by (by) (rate(metric[window])) * 60 OP threshold``
    - ``increase``: ``max by (by) (increase(metric[window])) OP threshold``
    - ``min``: ``min by (by) (metric) OP threshold``
    - ``absent``: ``absent(metric)``: no series at all (the exporter itself is gone)
    - ``busy``: ``1 - avg by (by) (rate(metric[window]))``: the share of time a host's CPUs
      were not idle (node_exporter's ``node_cpu_seconds_total{mode="idle"}``)
    - ``age``: ``time() - max by (by) (metric)``: seconds since a timestamp metric

    ``selector`` narrows the metric's series (``{phase=~"queued|connecting"}``).
    """

    alert: str
    group: str
    metric: str
    op: str
    key: str                      # config prefix: `<key>` threshold, `<key>_for` duration
    severity: str
    summary: str
    description: str
    run: str                      # what to run first, for the runbook annotation
    by: tuple[str, ...] = ()
    kind: str = "max"
    denominator: str = ""
    window: str = "5m"
    selector: str = ""

    @property
    def anchor(self) -> str:
        """The rule's section on the alerts page (Markdown's heading id)."""
        return self.alert.lower()

    def expr(self, threshold: float) -> str:
        by = f" by ({', '.join(self.by)})" if self.by else ""
        value = _number(threshold)
        series = self.metric + self.selector
        if self.kind == "absent":
            return f"absent({series})"
        if self.kind == "ratio":
            left = f"sum{by} ({series}) / sum{by} ({self.denominator})"
        elif self.kind == "per_minute":
            left = f"sum{by} (rate({series}[{self.window}])) * 60"
        elif self.kind == "increase":
            left = f"max{by} (increase({series}[{self.window}]))"
        elif self.kind == "busy":
            left = f"1 - avg{by} (rate({series}[{self.window}]))"
        elif self.kind == "age":
            left = f"time() - max{by} ({series})"
        elif self.kind == "min":
            left = f"min{by} ({series})"
        else:
            left = f"max{by} ({series})"
        return f"{left} {self.op} {value}"


# Defaults: thresholds, then `for` durations in seconds (seed 002's "Faster paging").
DEFAULTS: dict[str, float] = {
    "client_pool_used": 0.7, "client_pool_used_for": 300,
    "connections_used": 0.7, "connections_used_for": 300,
    "connections_critical": 0.9, "connections_critical_for": 60,
    "lock_queue_length": 5, "lock_queue_length_for": 30,
    "blocking_root_seconds": 60, "blocking_root_seconds_for": 0,
    "long_transaction_seconds": 900, "long_transaction_seconds_for": 0,
    "idle_in_transaction_sessions": 0, "idle_in_transaction_sessions_for": 300,
    "xmin_horizon_seconds": 3600, "xmin_horizon_seconds_for": 300,
    "pgbouncer_refill_stuck_seconds": 0, "pgbouncer_refill_stuck_seconds_for": 30,
    "pgbouncer_not_ready_per_minute": 10, "pgbouncer_not_ready_per_minute_for": 120,
    "client_deadline_exceeded_per_minute": 60, "client_deadline_exceeded_per_minute_for": 300,
    "client_overloaded_per_minute": 0, "client_overloaded_per_minute_for": 300,
    "client_pool_timeouts_per_minute": 1, "client_pool_timeouts_per_minute_for": 300,
    "database_cpu": 0.9, "database_cpu_for": 600,
    "deep_health_failed": 0, "deep_health_failed_for": 180,
    "synthetic_check_failed": 0, "synthetic_check_failed_for": 0,
    "synthetic_check_age_seconds": 900, "synthetic_check_age_seconds_for": 0,
    "migration_failed": 0, "migration_failed_for": 0,
    "migration_seconds": 300, "migration_seconds_for": 0,
    "restarts": 3, "restarts_for": 0,
    "source_down": 0, "source_down_for": 60,
    "exporter_absent": 1, "exporter_absent_for": 300,
}

RULES: tuple[Rule, ...] = (
    Rule("PgsteadyClientPoolSaturated", "pgsteady-client", "pgsteady_client_pool_in_use", ">=",
         "client_pool_used", "warning", "{{ $labels.service }}: client pool over {{ $value | "
         "humanizePercentage }} in use", "The service's own connection pool has been mostly in "
         "use; callers will soon queue and miss deadlines.",
         "pgsteady watch --dsn ... (pools pane); check the service's traffic and pool_size",
         by=CLIENT, kind="ratio", denominator="pgsteady_client_pool_size"),
    Rule("PgsteadyClientDeadlinesExceeded", "pgsteady-client",
         "pgsteady_client_deadline_exceeded_total", ">", "client_deadline_exceeded_per_minute",
         "warning", "{{ $labels.service }}: {{ $value | humanize }} deadlines a minute",
         "Callers are giving up on database lookups. With pgsteady the queries still finish and "
         "no pooler connection is lost; find why the database is slow.",
         "pgsteady doctor --dsn ... --pgbouncer ...", by=CLIENT, kind="per_minute"),
    Rule("PgsteadyClientOverloaded", "pgsteady-client", "pgsteady_client_overloaded_total", ">",
         "client_overloaded_per_minute", "warning",
         "{{ $labels.service }}: backlog full, {{ $value | humanize }} calls refused a minute",
         "The client's backlog is full and calls fail fast; the database or pooler is not "
         "keeping up with demand.", "pgsteady watch --dsn ...", by=CLIENT, kind="per_minute"),
    Rule("PgsteadyClientPoolTimeouts", "pgsteady-client", "pgsteady_client_deadline_exceeded_total",
         ">", "client_pool_timeouts_per_minute", "critical",
         "{{ $labels.service }}: {{ $value | humanize }} calls a minute timed out waiting for a "
         "connection", "Callers' deadlines pass while their jobs wait for a pool connection "
         "(phase queued or connecting): the pool is too small for the traffic, or every "
         "connection is held by slow queries.",
         "pgsteady watch --dsn ... (pools pane); pgsteady blockers --dsn ...", by=CLIENT,
         kind="per_minute", selector='{phase=~"queued|connecting"}'),
    Rule("PgsteadyConnectionsHigh", "pgsteady-postgres", "pgsteady_connections_used_ratio", ">=",
         "connections_used", "warning",
         "PostgreSQL connections {{ $value | humanizePercentage }} of usable slots",
         "Sessions are using most of max_connections minus the reserved slots; the migration "
         f"outage ({LOCK_QUEUE}) ran out of slots when restarted servers leaked sessions.",
         "pgsteady blockers --dsn ...; pgsteady doctor --dsn ...", by=WHERE),
    Rule("PgsteadyConnectionsCritical", "pgsteady-postgres", "pgsteady_connections_used_ratio",
         ">=", "connections_critical", "critical",
         "PostgreSQL connections {{ $value | humanizePercentage }} of usable slots",
         "New connections will soon be refused.", "pgsteady doctor --dsn ...", by=WHERE),
    Rule("PgsteadyLockQueue", "pgsteady-postgres", "pgsteady_lock_queue_length", ">=",
         "lock_queue_length", "critical",
         "{{ $value }} sessions queued for a lock on {{ $labels.relation }}",
         "A lock request (often a migration's ACCESS EXCLUSIVE) waits behind a long query and "
         f"every new query on the table queues behind it: the migration outage, {LOCK_QUEUE}.",
         "pgsteady blockers --dsn ... ; end the root blocker with --terminate PID if it is safe",
         by=(*WHERE, "relation")),
    Rule("PgsteadyBlockingRootOld", "pgsteady-postgres", "pgsteady_blocking_root_seconds", ">",
         "blocking_root_seconds", "warning",
         "{{ $labels.application_name }} has blocked others for {{ $value | humanizeDuration }}",
         "A session at the root of a blocking chain has held its locks for long.",
         "pgsteady blockers --dsn ...", by=(*WHERE, "application_name")),
    Rule("PgsteadyLongTransaction", "pgsteady-postgres", "pgsteady_longest_transaction_seconds",
         ">", "long_transaction_seconds", "warning",
         "{{ $labels.application_name }}: a transaction open for {{ $value | humanizeDuration }}",
         "Long transactions hold locks and snapshots; nothing stopped the migration outage's"
         " 7-hour queries.",
         "pgsteady doctor --dsn ... (long-transaction)", by=(*WHERE, "application_name")),
    Rule("PgsteadyIdleInTransaction", "pgsteady-postgres",
         "pgsteady_idle_in_transaction_sessions", ">", "idle_in_transaction_sessions",
         "warning", "{{ $value }} sessions idle in transaction",
         "Sessions sit idle inside an open transaction, holding their locks.",
         "pgsteady doctor --dsn ... (idle-in-transaction)", by=WHERE),
    Rule("PgsteadyXminHorizonOld", "pgsteady-postgres", "pgsteady_xmin_horizon_age_seconds", ">",
         "xmin_horizon_seconds", "warning",
         "vacuum held back for {{ $value | humanizeDuration }}",
         "An old snapshot keeps vacuum from cleaning up; the migration outage's "
         "long queries did this for eight hours.",
         "pgsteady doctor --dsn ... (xmin-horizon names the holder)", by=WHERE),
    Rule("PgsteadyPgbouncerRefillStuck", "pgsteady-pgbouncer",
         "pgsteady_pgbouncer_refill_stuck_seconds", ">", "pgbouncer_refill_stuck_seconds",
         "critical", "PgBouncer pool {{ $labels.database }}/{{ $labels.user }} stuck refilling",
         "sv_login sits at 1 while clients wait and no server connection is added: the pool "
         f"drain outage ({POOL_DRAIN}).",
         "pgsteady doctor --pgbouncer ... (pgbouncer-refill-stuck)",
         by=(*WHERE, "database", "user")),
    Rule("PgsteadyPgbouncerNotReadyClosures", "pgsteady-pgbouncer",
         "pgsteady_pgbouncer_not_ready_closures_total", ">", "pgbouncer_not_ready_per_minute",
         "warning", "PgBouncer closes {{ $value | humanize }} server connections a minute as "
         "not ready", "Clients leave while their query is queued or running, and PgBouncer "
         "destroys the server connection; drivers closing connections on deadlines do this.",
         "pgsteady doctor --pgbouncer ... --pgbouncer-log ...", by=WHERE, kind="per_minute",
         window="2m"),
    Rule("PgsteadyMigrationFailed", "pgsteady-migrations", "pgsteady_migration_last_run_success",
         "==", "migration_failed", "critical", "the last pgsteady migrate run failed",
         "A migration gave up (lock timeout, error); nothing of it was applied.",
         "pgsteady migrate --status; pgsteady preflight", by=WHERE, kind="min"),
    Rule("PgsteadyMigrationSlow", "pgsteady-migrations",
         "pgsteady_migration_last_run_duration_seconds", ">", "migration_seconds", "warning",
         "the last migration run took {{ $value | humanizeDuration }}",
         "Migrations that take long hold locks long, or retried behind a blocker.",
         "pgsteady preflight --dsn ...", by=WHERE),
    Rule("PgsteadyRepeatedRestarts", "pgsteady-deploy", "kube_pod_container_status_restarts_total",
         ">=", "restarts", "warning",
         "{{ $labels.namespace }}/{{ $labels.pod }} restarted {{ $value | humanize }} times in "
         "15 m",
         f"Repeated restarts: in the migration outage ({LOCK_QUEUE}), liveness probes that "
         "queried the database killed healthy servers, and each restart leaked sessions.",
         "kubectl describe pod; make liveness process-only (pgsteady.health)",
         by=("namespace", "pod", "container"), kind="increase", window="15m"),
    Rule("PgsteadyDatabaseCpuHigh", "pgsteady-host", "node_cpu_seconds_total", ">",
         "database_cpu", "critical", "{{ $labels.instance }}: CPU {{ $value | "
         "humanizePercentage }} busy",
         "The database host's CPUs have been busy for long (node_exporter): in the migration "
         f"outage ({LOCK_QUEUE}) the database ran hot for over an hour before anything broke. "
         "Scrape node_exporter on the database hosts under their own job to page on those only.",
         "pgsteady doctor --dsn ... ; the top queries by total time in pg_stat_statements",
         by=WHERE, kind="busy", selector='{mode="idle"}'),
    Rule("PgsteadyDeepHealthFailing", "pgsteady-probe", "pgsteady_probe_success", "==",
         "deep_health_failed", "critical", "{{ $labels.probe }}: the deep health check fails",
         "The service's deep health check (a real query through it) fails while its liveness "
         "may stay green: the migration outage's uptime check did not touch the database.",
         "curl the service's /health/deep; pgsteady doctor --dsn ...",
         by=(*WHERE, "probe"), kind="min", selector='{check="http"}'),
    Rule("PgsteadySyntheticCheckFailed", "pgsteady-probe", "pgsteady_probe_success", "==",
         "synthetic_check_failed", "critical",
         "{{ $labels.probe }}: the synthetic database check failed",
         "`pgsteady probe` (run every 5 minutes) could not run its query on the database "
         "within its deadline.", "pgsteady probe --dsn ... ; pgsteady doctor --dsn ...",
         by=(*WHERE, "probe"), kind="min", selector='{check="database"}'),
    Rule("PgsteadySyntheticCheckStale", "pgsteady-probe",
         "pgsteady_probe_last_run_timestamp_seconds", ">", "synthetic_check_age_seconds",
         "warning", "{{ $labels.probe }}: no probe result for {{ $value | humanizeDuration }}",
         "The synthetic check stopped running (its cron job or CronJob is gone or stuck): "
         "its failure alert is blind.", "kubectl get cronjobs; the job's last logs",
         by=(*WHERE, "probe"), kind="age"),
    Rule("PgsteadySourceDown", "pgsteady-exporter", "pgsteady_up", "==", "source_down",
         "critical", "pgsteady exporter cannot read {{ $labels.source }}",
         "The exporter's last scrape of this source failed; its alerts are blind.",
         "pgsteady doctor --dsn ... --pgbouncer ...", by=(*WHERE, "source"), kind="min"),
    Rule("PgsteadyExporterAbsent", "pgsteady-exporter", "pgsteady_up", "==", "exporter_absent",
         "critical", "no pgsteady exporter is being scraped",
         "Prometheus has no pgsteady_up series at all: the exporter is down, or its scrape "
         "config is gone. Every other pgsteady alert is silent while this fires.",
         "kubectl get pods / systemctl status for the exporter; curl its /metrics",
         kind="absent"),
)

# Thresholds that are shares of 1 (a ratio metric): 70 where 0.7 was meant never fires.
SHARES = frozenset(rule.key for rule in RULES
                   if rule.kind in ("ratio", "busy") or rule.metric.endswith("_ratio"))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}


def _duration(key: str, raw: Any) -> float:
    if isinstance(raw, bool):
        raise UsageError(f"alerts config: {key} must be a duration such as \"5m\", not {raw}")
    if isinstance(raw, (int, float)):
        seconds = float(raw)
    elif isinstance(raw, str) and (m := _DURATION.match(raw)):
        seconds = float(m[1]) * _UNITS[m[2]]
    else:
        raise UsageError(f"alerts config: {key} = {raw!r} is not a duration; write it like "
                         "\"30s\", \"5m\" or \"1h\" (negative durations are refused)")
    if seconds < 0:
        raise UsageError(f"alerts config: {key} = {raw!r} is negative; durations must be >= 0")
    if not math.isfinite(seconds):  # a rule that waits for ever never fires
        raise UsageError(f"alerts config: {key} = {raw!r} is not a finite duration; write "
                         "it like \"30s\", \"5m\" or \"1h\"")
    return seconds


def prom_duration(seconds: float) -> str:
    """Seconds as a Prometheus duration: 300 -> "5m", 30 -> "30s", 0 -> "0s"."""
    whole = round(seconds)
    for unit, size in (("h", 3600), ("m", 60)):
        if whole and whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


@dataclass(frozen=True)
class AlertConfig:
    """Thresholds and `for` durations (seconds); built from defaults and overrides."""

    values: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULTS))
    source: str | None = None
    runbook_base: str = RUNBOOK_BASE

    def runbook_url(self, rule: Rule) -> str:
        return f"{self.runbook_base.rstrip('#')}#{rule.anchor}"

    def threshold(self, rule: Rule) -> float:
        return self.values[rule.key]

    def for_seconds(self, rule: Rule) -> float:
        return self.values[f"{rule.key}_for"]

    @classmethod
    def of(cls, overrides: Mapping[str, Any], source: str | None = None) -> AlertConfig:
        values = dict(DEFAULTS)
        base = RUNBOOK_BASE
        for key, raw in overrides.items():
            if key == "runbook_base":
                if not isinstance(raw, str) or not raw.startswith(("https://", "http://")):
                    raise UsageError(f"alerts config: runbook_base = {raw!r} must be an "
                                     "http(s) URL of your copy of the alerts page")
                base = raw
                continue
            if key not in DEFAULTS:
                near = difflib.get_close_matches(key, DEFAULTS, n=1)
                hint = f"; did you mean {near[0]}?" if near else \
                    "; see `pgsteady alerts --help` for the keys"
                raise UsageError(f"alerts config{f' {source}' if source else ''}: unknown "
                                 f"key {key!r}{hint}")
            if key.endswith("_for"):
                values[key] = _duration(key, raw)
                continue
            if isinstance(raw, bool) or not isinstance(raw, (int, float)):
                raise UsageError(f"alerts config: {key} = {raw!r} must be a number")
            if raw < 0:
                raise UsageError(f"alerts config: {key} = {raw} is negative; thresholds are "
                                 ">= 0")
            if not math.isfinite(raw):  # `>= inf` / `>= nan` never fires
                raise UsageError(f"alerts config: {key} = {raw} is not a finite number")
            if key in SHARES and raw > 1:
                raise UsageError(f"alerts config: {key} = {raw} is a share of 1 and can never "
                                 f"be reached; write {raw / 100:g} for {raw:g} %")
            values[key] = float(raw)
        return cls(values, source, base)


def load_config(path: Path | None = None, start: Path | None = None) -> AlertConfig:
    """From ``path`` (a TOML file of keys, or with an ``[alerts]`` or ``[tool.pgsteady.alerts]``
    table), else from the nearest pyproject.toml's ``[tool.pgsteady.alerts]``, else defaults."""
    if path is None:
        folder = (start or Path.cwd()).resolve()
        for candidate in (folder, *folder.parents):
            pyproject = candidate / "pyproject.toml"
            if pyproject.is_file():
                data = _read_toml(pyproject)
                table = data.get("tool", {}).get("pgsteady", {}).get("alerts", {})
                return AlertConfig.of(table, str(pyproject)) if table else AlertConfig()
        return AlertConfig()
    data = _read_toml(path)
    table = data.get("tool", {}).get("pgsteady", {}).get("alerts") or data.get("alerts") or data
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [alerts] must be a table of keys")
    return AlertConfig.of(table, str(path))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file; give --config a TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text; give --config a TOML file") from None


def _q(text: str) -> str:
    """A YAML scalar: JSON's double-quoted strings are valid YAML and escape everything."""
    return json.dumps(text, ensure_ascii=False)


def _groups(cfg: AlertConfig, rules: Iterable[Rule], indent: str) -> list[str]:
    """The ``groups:`` list of a rules file, each line prefixed with ``indent``."""
    groups: dict[str, list[Rule]] = {}
    for rule in rules:
        groups.setdefault(rule.group, []).append(rule)
    lines = ["groups:"]
    for group, members in groups.items():
        lines += [f"  - name: {group}", "    rules:"]
        for rule in members:
            lines += [
                f"      - alert: {rule.alert}",
                f"        expr: {_q(rule.expr(cfg.threshold(rule)))}",
                f"        for: {prom_duration(cfg.for_seconds(rule))}",
                "        labels:",
                f"          severity: {rule.severity}",
                "        annotations:",
                f"          summary: {_q(rule.summary)}",
                f"          description: {_q(rule.description)}",
                f"          runbook: {_q(f'Run: {rule.run}. See {RUNBOOK}.')}",
                f"          runbook_url: {_q(cfg.runbook_url(rule))}",
            ]
    return [indent + line for line in lines]


def _generated(cfg: AlertConfig) -> str:
    return ("# Generated by `pgsteady alerts`; thresholds from defaults"
            + (f" and {cfg.source}" if cfg.source else "") + ".")


def prometheus_rules(config: AlertConfig | None = None,
                     rules: Iterable[Rule] = RULES) -> str:
    """The rules file, one group per concern, ready for ``promtool check rules``."""
    cfg = config or AlertConfig()
    return "\n".join([_generated(cfg), *_groups(cfg, rules, "")]) + "\n"


# Kubernetes object names (RFC 1123 subdomains) and label keys/values, as the API checks them.
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def prometheus_operator_rules(config: AlertConfig | None = None, *, name: str = "pgsteady",
                              namespace: str | None = None,
                              labels: Mapping[str, str] | None = None,
                              rules: Iterable[Rule] = RULES) -> str:
    """The same rules as a ``PrometheusRule`` (monitoring.coreos.com/v1) for the Prometheus
    Operator: ``labels`` are what its ``ruleSelector`` matches (kube-prometheus-stack's
    default is ``release: <its release name>``)."""
    cfg = config or AlertConfig()
    if not _K8S_NAME.match(name):
        raise UsageError(f"--name {name!r} is not a Kubernetes object name; use lowercase "
                         "letters, digits, '-' and '.', e.g. pgsteady-alerts")
    if namespace is not None and not re.match(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
                                              namespace):
        raise UsageError(f"--namespace {namespace!r} is not a Kubernetes namespace name")
    for key, value in (labels or {}).items():
        if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value):
            raise UsageError(f"--label {key}={value} is not a Kubernetes label; write it "
                             "like release=kube-prometheus-stack")
    lines = [_generated(cfg), "apiVersion: monitoring.coreos.com/v1", "kind: PrometheusRule",
             "metadata:", f"  name: {name}"]
    if namespace is not None:
        lines.append(f"  namespace: {namespace}")
    if labels:
        lines.append("  labels:")
        lines += [f"    {_q(key)}: {_q(value)}" for key, value in sorted(labels.items())]
    lines.append("spec:")
    lines += _groups(cfg, rules, "  ")
    return "\n".join(lines) + "\n"


def runbook_markdown(config: AlertConfig | None = None, rules: Iterable[Rule] = RULES) -> str:
    """The alerts page each rule's ``runbook_url`` points at: one section per alert (its
    heading is the anchor), with what it means, when it fires and what to run first."""
    cfg = config or AlertConfig()
    lines = ["# Alerts: what each one means and what to do",
             "",
             "`pgsteady alerts` prints these rules for Prometheus; every alert's `runbook_url` "
             "points at its section here. Thresholds and `for` durations below are the "
             "defaults (`[tool.pgsteady.alerts]` or `--config` change them). Every rule keeps "
             "the `instance` and `job` labels, so a page names the exporter (and so the "
             "database) that fired.",
             ""]
    for rule in rules:
        threshold = "" if rule.kind == "absent" else \
            f" {rule.op} `{_number(cfg.threshold(rule))}` (`{rule.key}`)"
        lines += [f"## {rule.alert}", "",
                  f"**{rule.severity}** · `{rule.expr(cfg.threshold(rule))}` for "
                  f"`{prom_duration(cfg.for_seconds(rule))}` (`{rule.key}_for`)"
                  + ("" if not threshold else f" · fires at{threshold}"), "",
                  rule.description, "",
                  f"First: `{rule.run}`.", ""]
    lines.append("<!-- generated by `pgsteady alerts --format markdown`; do not edit -->")
    return "\n".join(lines) + "\n"
