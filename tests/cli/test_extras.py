"""A missing optional extra: one line naming what to install (exit 2) from the command line,
an ImportError that says the same from the API — never a bare ModuleNotFoundError."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import pgsteady

SRC = str(Path(pgsteady.__file__).resolve().parents[1])

# The module made unimportable (as if its extra were not installed), then the code to run.
HIDE = "import sys\nfor name in {hidden!r}: sys.modules[name] = None\n"
CLI = "from pgsteady._main import main\nsys.argv = ['pgsteady', *{argv!r}]\nsys.exit(main())\n"


def _run(hidden: list[str], code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-c", HIDE.format(hidden=hidden) + code], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("argv", "feature"), [
    (["exporter", "--dsn", "host=127.0.0.1 port=1"], "the exporter"),
    (["watch", "--dsn", "host=127.0.0.1 port=1"], "the exporter"),
    (["migrate", "--dsn", "host=127.0.0.1 port=1", "--dir", ".", "--metrics-file", "m.prom"],
     "--metrics-file"),
])
def test_cli_without_prometheus_client_says_which_extra(tmp_path, argv, feature):
    """Without prometheus_client: exit 2 and one stderr line naming the feature and
    `pip install 'pgsteady[metrics]'` (it was a traceback)."""
    out = _run(["prometheus_client"], CLI.format(argv=argv), tmp_path)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert feature in lines[0] and "pip install 'pgsteady[metrics]'" in lines[0]


@pytest.mark.parametrize(("hidden", "code", "extra"), [
    ("redis", "from pgsteady.guards import RedisBackend\nRedisBackend('redis://127.0.0.1:1')",
     "redis"),
    ("prometheus_client", "import pgsteady.metrics", "metrics"),
    ("prometheus_client", "import pgsteady.guards.metrics", "metrics"),
    ("matplotlib", "from pgsteady.sim.report import write_phase_map\n"
     "write_phase_map(None, None)", "lab"),
])
def test_api_without_an_extra_raises_a_clear_import_error(tmp_path, hidden, code, extra):
    """The API raises an ImportError subclass (a pgsteady UsageError too) whose message names
    the extra to install."""
    check = ("try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) +
             "except ImportError as exc:\n"
             "    from pgsteady.errors import UsageError\n"
             "    print(type(exc).__name__, isinstance(exc, UsageError), exc.name, exc)\n")
    out = _run([hidden], check, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"MissingExtra True {hidden} "), out.stdout
    assert f"pip install 'pgsteady[{extra}]'" in out.stdout
