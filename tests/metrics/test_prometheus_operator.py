"""`pgsteady alerts --format prometheus-operator`: a PrometheusRule the Prometheus Operator's
API accepts, checked offline against the CRD's own schema (vendored as
fixtures/prometheusrule-v1.schema.json, from prometheus-operator v0.82.2), with the same
rules as the plain rules file (promtool checks its spec)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pgsteady.inspect.alerts import RULES

PGSTEADY = [sys.executable, "-m", "pgsteady"]
SCHEMA = json.loads((Path(__file__).parent / "fixtures" / "prometheusrule-v1.schema.json")
                    .read_text())


def violations(value: Any, schema: dict[str, Any], at: str = "$") -> list[str]:
    """What the CRD's structural schema refuses in ``value`` (the keywords it uses: type,
    properties, required, additionalProperties, items, pattern, minLength, anyOf, list-map
    keys). Fields the schema does not list are reported too: the API server would prune
    them, silently."""
    if "anyOf" in schema:
        if all(violations(value, option, at) for option in schema["anyOf"]):
            return [f"{at}: matches none of {schema['anyOf']}"]
        return []
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "integer": int}
    if kind and (not isinstance(value, types[kind]) or isinstance(value, bool)):
        return [f"{at}: expected {kind}, got {type(value).__name__}"]
    found: list[str] = []
    if kind == "object":
        props = schema.get("properties", {})
        found += [f"{at}: missing {key}" for key in schema.get("required", [])
                  if key not in value]
        for key, item in value.items():
            if key in props:
                found += violations(item, props[key], f"{at}.{key}")
            elif "additionalProperties" in schema:
                found += violations(item, schema["additionalProperties"], f"{at}.{key}")
            elif props:
                found.append(f"{at}.{key}: not in the schema (would be pruned)")
    elif kind == "array":
        for i, item in enumerate(value):
            found += violations(item, schema["items"], f"{at}[{i}]")
        keys = schema.get("x-kubernetes-list-map-keys")
        if keys:
            seen = [tuple(item.get(k) for k in keys) for item in value]
            if len(seen) != len(set(seen)):
                found.append(f"{at}: duplicate list-map keys {keys}")
    elif kind == "string":
        if len(value) < schema.get("minLength", 0):
            found.append(f"{at}: shorter than {schema['minLength']}")
        if "pattern" in schema:
            pattern = schema["pattern"].replace("^(?i)", "(?i)^")  # Go's flag placement
            if not re.search(pattern, value):
                found.append(f"{at}: {value!r} does not match {schema['pattern']}")
    return found


def manifest(*args: str) -> tuple[str, dict[str, Any]]:
    done = subprocess.run([*PGSTEADY, "alerts", "--format", "prometheus-operator", *args],
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout, yaml.safe_load(done.stdout)


def test_manifest_validates_against_the_crd_schema():
    """The printed PrometheusRule has apiVersion/kind/metadata, the ruleSelector's labels, and
    no schema violation; every rule is in it, once."""
    _, doc = manifest("--label", "release=kube-prometheus-stack", "--namespace", "monitoring")
    assert violations(doc, SCHEMA) == []
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    assert doc["kind"] == "PrometheusRule"
    assert doc["metadata"] == {"name": "pgsteady", "namespace": "monitoring",
                               "labels": {"release": "kube-prometheus-stack"}}
    alerts = [r["alert"] for g in doc["spec"]["groups"] for r in g["rules"]]
    assert sorted(alerts) == sorted(rule.alert for rule in RULES)


def test_the_validator_refuses_what_the_api_would():
    """The offline check can fail: a bad `for`, a missing expr, a misspelt field, a
    duplicate group name are each reported."""
    _, doc = manifest()
    rule = doc["spec"]["groups"][0]["rules"][0]
    rule["for"] = "5 minutes"
    del doc["spec"]["groups"][1]["rules"][0]["expr"]
    doc["spec"]["groups"][2]["rules"][0]["anotations"] = {}
    doc["spec"]["groups"].append(dict(doc["spec"]["groups"][0]))
    found = violations(doc, SCHEMA)
    assert any("does not match" in f for f in found)
    assert any("missing expr" in f for f in found)
    assert any("anotations: not in the schema" in f for f in found)
    assert any("duplicate list-map keys" in f for f in found)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool")
def test_manifest_spec_is_the_rules_file_promtool_accepts(tmp_path):
    """The manifest's spec is a rules file promtool accepts, and equals `pgsteady alerts`."""
    _, doc = manifest()
    plain = yaml.safe_load(subprocess.run([*PGSTEADY, "alerts"], capture_output=True,
                                          text=True, timeout=60, check=True).stdout)
    assert doc["spec"] == plain
    path = tmp_path / "spec.yml"
    path.write_text(yaml.safe_dump(doc["spec"]))
    check = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True,
                           text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize(("args", "complaint"), [
    (("--label", "release"), "is not KEY=VALUE"),
    (("--label", "bad key=x"), "is not a Kubernetes label"),
    (("--name", "Pgsteady_Rules"), "is not a Kubernetes object name"),
    (("--namespace", "Monitoring"), "is not a Kubernetes namespace name"),
])
def test_bad_manifest_options_are_one_line_and_exit_2(args, complaint):
    """Labels, names and namespaces the API would refuse: one line, exit 2, nothing printed."""
    done = subprocess.run([*PGSTEADY, "alerts", "--format", "prometheus-operator", *args],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and complaint in done.stderr
