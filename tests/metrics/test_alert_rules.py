"""`pgsteady alerts`: the rules file passes promtool, and each rule fires and stays quiet
when promtool's own rule-test engine says it should."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from pgsteady.inspect.alerts import RULES, RUNBOOK, AlertConfig, Rule, prometheus_rules
from pgsteady.inspect.evaluate import matchers

PGSTEADY = [sys.executable, "-m", "pgsteady"]
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                    reason="needs promtool (Debian's prometheus package)")


def _humanize(value: float, how: str) -> str:
    if how == "humanizePercentage":
        return f"{value * 100:.4g}%"
    if how == "humanizeDuration":
        seconds = int(value)
        h, rest = divmod(seconds, 3600)
        m, s = divmod(rest, 60)
        parts = ([f"{h}h"] if h else []) + ([f"{m}m"] if h or m else []) + [f"{s}s"]
        return " ".join(parts)
    if how == "humanize":
        return f"{value:.4g}"
    return f"{value:g}"


def render(template: str, value: float, labels: dict[str, str]) -> str:
    """Prometheus's template output for the few forms our annotations use."""
    def sub(match: re.Match[str]) -> str:
        name, how = match[1], match[2]
        if name.startswith("$labels."):
            return labels[name.removeprefix("$labels.")]
        return _humanize(value, how or "")
    return re.sub(r"\{\{\s*(\$value|\$labels\.\w+)\s*(?:\|\s*(\w+)\s*)?\}\}", sub, template)


def _selected(rule: Rule) -> dict[str, str]:
    """Labels that satisfy the rule's selector (the first alternative of a regex)."""
    return {m.name: m.value.split("|")[0] for m in matchers(rule.selector) if m.op in ("=", "=~")}


def _case(rule: Rule, threshold: float, firing: bool) -> tuple[list[dict], float]:
    """Input series (1-minute samples) that make ``rule`` fire or not, and the value it sees."""
    labels = {key: f"{key}-a" for key in rule.by}
    series_labels = {"instance": "i1", "job": "j", **labels, **_selected(rule)}
    def name(metric: str, extra: dict[str, str]) -> str:
        return metric + "{" + ", ".join(f'{k}="{v}"' for k, v in extra.items()) + "}"
    if rule.kind == "busy":  # idle seconds per second: 0.05 (95 % busy) or 1 (idle)
        idle = 0.05 if firing else 1.0
        return ([{"series": name(rule.metric, series_labels), "values": f"0+{idle * 60:g}x40"}],
                1 - idle)
    if rule.kind == "age":  # a timestamp left at 0 (stale), or kept at the current time
        step = 0 if firing else 60
        return [{"series": name(rule.metric, series_labels), "values": f"0+{step}x60"}], 0.0
    if rule.kind in ("per_minute", "increase"):
        # Counters: increments per minute (1-minute samples), none when quiet.
        level = (threshold + 5 if rule.kind == "per_minute" else 1) if firing else 0
    elif rule.op == "==":
        level = threshold if firing else threshold + 1
    elif rule.op == ">=":
        level = threshold if firing else max(threshold - 1, 0) * (threshold >= 1)
    else:
        level = threshold + (61 if "seconds" in rule.key else 5) if firing else 0
    if rule.kind == "ratio":
        numerator = level * 10
        return ([{"series": name(rule.metric, series_labels), "values": f"{numerator:g}x40"},
                 {"series": name(rule.denominator, series_labels), "values": "10x40"}], level)
    if rule.kind in ("per_minute", "increase"):
        return ([{"series": name(rule.metric, series_labels),
                  "values": f"0+{level:g}x40"}], level * (15 if rule.kind == "increase" else 1))
    return [{"series": name(rule.metric, series_labels), "values": f"{level:g}x40"}], level


@needs_promtool
def test_generated_rules_pass_promtool_check(tmp_path):
    """`pgsteady alerts` prints a file promtool accepts, with every rule in it."""
    done = subprocess.run([*PGSTEADY, "alerts"], capture_output=True, text=True, timeout=60,
                          check=True)
    path = tmp_path / "rules.yml"
    path.write_text(done.stdout)
    check = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True,
                           text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(RULES)} rules found" in check.stdout
    for rule in RULES:
        assert f"alert: {rule.alert}" in done.stdout


@needs_promtool
def test_every_rule_fires_and_stays_quiet_under_promtool(tmp_path):
    """promtool test rules: each rule fires on a series over its threshold for its `for`, with
    the expected labels and annotations, and does not fire below it."""
    config = AlertConfig()
    (tmp_path / "rules.yml").write_text(prometheus_rules(config))
    tests = []
    for rule in RULES:
        if rule.kind == "absent":
            continue  # test_absent_rule_fires_only_with_no_series
        threshold = config.threshold(rule)
        eval_minutes = int(config.for_seconds(rule) // 60) + 20
        for firing in (True, False):
            series, seen = _case(rule, threshold, firing)
            if rule.kind == "age":  # time() at eval_time minus a timestamp left at 0
                seen = eval_minutes * 60
            labels = {key: f"{key}-a" for key in rule.by}
            expected = [] if not firing else [{
                "exp_labels": {**labels, "severity": rule.severity},
                "exp_annotations": {
                    "summary": render(rule.summary, seen, labels),
                    "description": rule.description,
                    "runbook": f"Run: {rule.run}. See {RUNBOOK}.",
                    "runbook_url": config.runbook_url(rule),
                }}]
            tests.append({"interval": "1m", "input_series": series,
                          "alert_rule_test": [{"eval_time": f"{eval_minutes}m",
                                               "alertname": rule.alert,
                                               "exp_alerts": expected}]})
    (tmp_path / "tests.yml").write_text(json.dumps(
        {"rule_files": ["rules.yml"], "evaluation_interval": "30s", "tests": tests}, indent=1))
    done = subprocess.run(["promtool", "test", "rules", "tests.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert len(tests) == 2 * len([r for r in RULES if r.kind != "absent"])


def _promtool_test(tmp_path, config: AlertConfig, tests: list[dict]) -> None:
    (tmp_path / "rules.yml").write_text(prometheus_rules(config))
    (tmp_path / "tests.yml").write_text(json.dumps(
        {"rule_files": ["rules.yml"], "evaluation_interval": "30s", "tests": tests}, indent=1))
    done = subprocess.run(["promtool", "test", "rules", "tests.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@needs_promtool
def test_two_databases_fire_as_two_alerts_that_name_their_instance(tmp_path):
    """Lock queues on two exporters' databases are two alerts, each with its instance and job,
    not one alert with the labels aggregated away."""
    def series(instance: str) -> dict:
        return {"series": f'pgsteady_lock_queue_length{{instance="{instance}", job="pg", '
                          f'relation="public.orgs"}}', "values": "9x10"}
    expected = [{"exp_labels": {"instance": name, "job": "pg", "relation": "public.orgs",
                                "severity": "critical"}} for name in ("db-a:19187", "db-b:19187")]
    config = AlertConfig()
    rule = next(r for r in RULES if r.alert == "PgsteadyLockQueue")
    for item in expected:
        item["exp_annotations"] = {
            "summary": "9 sessions queued for a lock on public.orgs",
            "description": rule.description,
            "runbook": f"Run: {rule.run}. See {RUNBOOK}.",
            "runbook_url": config.runbook_url(rule)}
    _promtool_test(tmp_path, config, [{
        "interval": "1m", "input_series": [series("db-a:19187"), series("db-b:19187")],
        "alert_rule_test": [{"eval_time": "5m", "alertname": "PgsteadyLockQueue",
                             "exp_alerts": expected}]}])


@needs_promtool
def test_absent_rule_fires_only_with_no_series(tmp_path):
    """PgsteadyExporterAbsent fires after its `for` when no pgsteady_up series exists at all,
    and stays quiet while any exporter is scraped."""
    config = AlertConfig()
    rule = next(r for r in RULES if r.kind == "absent")
    fired = {"exp_labels": {"severity": "critical"}, "exp_annotations": {
        "summary": rule.summary, "description": rule.description,
        "runbook": f"Run: {rule.run}. See {RUNBOOK}.",
        "runbook_url": config.runbook_url(rule)}}
    _promtool_test(tmp_path, config, [
        {"interval": "1m", "input_series": [{"series": "other_metric", "values": "1x20"}],
         "alert_rule_test": [{"eval_time": "10m", "alertname": rule.alert,
                              "exp_alerts": [fired]}]},
        {"interval": "1m", "input_series": [
            {"series": 'pgsteady_up{instance="a", job="j", source="postgres"}',
             "values": "1x20"}],
         "alert_rule_test": [{"eval_time": "10m", "alertname": rule.alert, "exp_alerts": []}]},
    ])


def test_every_runbook_url_has_its_section_on_the_generated_page():
    """Each rule's runbook_url anchor is a heading of docs/incidents/alerts.md, and that page
    is exactly what `pgsteady alerts --format markdown` prints."""
    from pathlib import Path

    from pgsteady.inspect.alerts import runbook_markdown

    page = Path(__file__).resolve().parents[2] / "docs" / "incidents" / "alerts.md"
    assert page.read_text() == runbook_markdown(), \
        "regenerate: pgsteady alerts --format markdown > docs/incidents/alerts.md"
    headings = {line[3:].strip().lower() for line in page.read_text().splitlines()
                if line.startswith("## ")}
    config = AlertConfig()
    for rule in RULES:
        assert config.runbook_url(rule).endswith("#" + rule.anchor)
        assert rule.anchor in headings


@needs_promtool
def test_shortened_for_comes_from_the_config(tmp_path):
    """A config that shortens a rule's `for` changes the printed rule and nothing else."""
    cfg = tmp_path / "alerts.toml"
    cfg.write_text('lock_queue_length = 3\nlock_queue_length_for = "5s"\n')
    out = subprocess.run([*PGSTEADY, "alerts", "--config", str(cfg)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    block = out.split("alert: PgsteadyLockQueue")[1].split("- alert:")[0]
    assert ">= 3" in block and "for: 5s" in block
    assert out.count("for: 5s") == 1


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("lock_queue_lenght = 3\n", "unknown key 'lock_queue_lenght'; did you mean lock_queue_length?"),
        ('lock_queue_length_for = "-5m"\n', "is not a duration"),
        ("lock_queue_length_for = -5\n", "is negative"),
        ("lock_queue_length = -1\n", "is negative"),
        ('lock_queue_length = "many"\n', "must be a number"),
        ("lock_queue_length = \n", "not valid TOML"),
        ("lock_queue_length = inf\n", "not a finite number"),
        ("lock_queue_length = nan\n", "not a finite number"),
        ("lock_queue_length_for = nan\n", "not a finite duration"),
        ("client_pool_used = 70\n", "write 0.7 for 70 %"),
        ("connections_critical = 90\n", "is a share of 1"),
        ('runbook_base = "wiki/alerts"\n', "must be an http(s) URL"),
        (b"\xc2\x00 binary", "not UTF-8 text"),
    ],
)
def test_bad_config_is_one_line_and_exit_2(tmp_path, content, complaint):
    """Unknown keys, negative, infinite or malformed values, a binary file: one line naming
    the key, exit 2."""
    cfg = tmp_path / "alerts.toml"
    if isinstance(content, bytes):
        cfg.write_bytes(content)
    else:
        cfg.write_text(content)
    done = subprocess.run([*PGSTEADY, "alerts", "--config", str(cfg)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and complaint in done.stderr
    assert done.stdout == "" or done.stdout.startswith("{")


def test_pyproject_table_is_read(tmp_path):
    """[tool.pgsteady.alerts] in the nearest pyproject.toml overrides the defaults."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pgsteady.alerts]\nconnections_used = 0.8\nconnections_used_for = "10m"\n')
    out = subprocess.run([*PGSTEADY, "alerts", "--list"], capture_output=True, text=True,
                         timeout=60, check=True, cwd=tmp_path).stdout
    assert "connections_used = 0.8  (default 0.7)" in out
    assert "connections_used_for = 10m  (default 5m)" in out
