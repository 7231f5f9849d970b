"""The Deploying page's Kubernetes manifests, run: the migrate Job's command against a real
database, the Deployment's command and probes against a real gunicorn behind PgBouncer, and
the limits they set checked against each other."""

from __future__ import annotations

import runpy
import subprocess
import time
from typing import Any

import psycopg
import yaml

from conftest import APPS, Bouncer, app_env, free_port, get, stop, wait_http
from pgsteady.settings import parse_duration


def _container(manifest: str) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = yaml.safe_load((APPS / "k8s" / manifest).read_text())
    pod = spec["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return spec, container


def _literal_env(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container["env"] if "value" in item}


def test_migrate_job_applies_the_folder_within_its_limits(pgsteady_database):
    """The Job's command (its workingDir is apps/), with its secret's DSN, migrates a fresh
    database (exit 0, both files applied) and is a no-op the second time; lock_timeout <
    retry budget < activeDeadlineSeconds, and a failed Job is not retried."""
    spec, container = _container("migrate-job.yaml")
    command = container["command"]
    env = app_env(PGSTEADY_DSN=pgsteady_database.dsn)
    for _ in range(2):
        done = subprocess.run(command, cwd=APPS, env=env, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    with psycopg.connect(pgsteady_database.dsn) as conn:
        columns = {row[0] for row in conn.execute(
            "select column_name from information_schema.columns where table_name = 'stock'")}
    assert columns == {"sku", "n", "note"}
    lock_timeout = parse_duration(command[command.index("--lock-timeout") + 1])
    budget = parse_duration(command[command.index("--retry-budget") + 1])
    assert lock_timeout < budget < spec["spec"]["activeDeadlineSeconds"]
    assert spec["spec"]["backoffLimit"] == 0
    assert container["env"][0]["valueFrom"]["secretKeyRef"]["name"].endswith("-direct")


def test_deployment_command_and_probes_answer(bouncer: Bouncer, tmp_path):
    """The Deployment's command starts gunicorn with the page's config; liveness answers 200
    at once and readiness once the workers have connected (asked every periodSeconds), each within timeoutSeconds; the
    probe timeouts exceed the request deadline and the grace period gunicorn's."""
    spec, container = _container("deployment.yaml")
    port = free_port()
    env = _literal_env(container) | {"BIND": f"127.0.0.1:{port}", "PGSTEADY_DSN": bouncer.dsn}
    log = tmp_path / "gunicorn.log"
    proc = subprocess.Popen(container["command"], cwd=APPS, env=app_env(**env),
                            stdout=log.open("w"), stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # stop() kills what is left of it
    try:
        wait_http(port, proc)
        for probe in ("livenessProbe", "readinessProbe"):
            settings = container[probe]
            # As the kubelet does: readiness may fail while the workers open their first
            # connections (the pod is not yet in rotation, and a readiness failure never
            # restarts it), so it is asked again every periodSeconds until it answers, here
            # for up to 30 s; liveness must answer the first time.
            within = 30.0 if probe == "readinessProbe" else 0.0
            end = time.monotonic() + within
            while True:
                start = time.monotonic()
                status, body = get(port, settings["httpGet"]["path"],
                                   timeout=settings["timeoutSeconds"])
                assert time.monotonic() - start < settings["timeoutSeconds"]
                if status == 200 or time.monotonic() + settings["periodSeconds"] > end:
                    break
                time.sleep(settings["periodSeconds"])
            assert status == 200, (probe, body, log.read_text()[-3000:])
            assert settings["timeoutSeconds"] > float(env["WEB_DEADLINE"])
    finally:
        stop(proc)
    config = runpy.run_path(str(APPS / "gunicorn_conf.py"))
    pod = spec["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] > config["graceful_timeout"]
    assert float(env["WEB_DEADLINE"]) < config["timeout"]
