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


CLI_HIDDEN = ["pglast", "rich", "orjson"]


@pytest.mark.parametrize("argv", [["lint"], ["lint", "migrations"], ["doctor", "--json"],
                                  ["lab", "up", "--help"], ["--help"]])
def test_cli_without_its_extra_says_pip_install_pgsteady_cli(tmp_path, argv):
    """`pip install pgsteady` is the library alone: any verb (its --help too) is one stderr
    line naming `pip install 'pgsteady[cli]'`, exit 2 — not a traceback from deep inside."""
    out = _run(CLI_HIDDEN, CLI.format(argv=argv), tmp_path)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert "needs pglast, rich, orjson, which are not installed" in lines[0]
    assert lines[0].endswith("pip install 'pgsteady[cli]'")


def test_cli_version_needs_no_extra(tmp_path):
    """`pgsteady --version` answers without the cli extra."""
    out = _run(CLI_HIDDEN, CLI.format(argv=["--version"]), tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"pgsteady {pgsteady.__version__}"


def test_cli_modules_are_the_cli_extra():
    """The modules the CLI looks for at start-up are the `cli` extra's, and pyproject's extras
    are the ones pgsteady._extras names (so every hint names an extra that exists)."""
    import tomllib

    from pgsteady._extras import EXTRAS
    from pgsteady.cli import CLI_MODULES

    assert tuple(EXTRAS["cli"]) == CLI_MODULES
    project = tomllib.loads((Path(SRC).parent / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert set(EXTRAS) <= set(extras)
    assert {r.split(">")[0].split("[")[0] for r in extras["cli"]} == {"pglast", "rich", "orjson"}
    # the core is the runtime alone, and leaves psycopg's implementation to the application
    assert sorted(r.split(">")[0] for r in project["dependencies"]) == ["psycopg", "psycopg-pool"]
    assert "sim" not in extras


RUNTIME = ("import pgsteady\nfrom pgsteady import AsyncDatabase, Database\n"
           "from pgsteady.guards import CircuitBreaker, KeyedLimiter, StaleCache, bounded\n"
           "from pgsteady.health import Health, db_check\n"
           "import pgsteady.testing.plugin\n"
           "from pgsteady.guards.limits import _is_plain_select\n"
           "assert _is_plain_select('-- hi\\nSELECT a FROM t WHERE b = %s')\n"
           "assert not _is_plain_select('WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d')\n"
           "print('ok')\n")


def test_runtime_imports_without_any_extra(tmp_path):
    """Database, AsyncDatabase, guards, health and the pytest plugin load with none of the
    extras' modules (the plugin used to import pglast: every pytest run of an application
    that installed only pgsteady would have failed)."""
    hidden = [*CLI_HIDDEN, "prometheus_client", "redis", "matplotlib", "uvicorn", "selenium",
              "alembic", "sqlalchemy", "django"]
    out = _run(hidden, RUNTIME, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.parametrize(("hidden", "code", "extra"), [
    ("pglast", "from pgsteady.migrate import migrate", "cli"),
    ("pglast", "from pgsteady.migrate import run_alembic_migrations", "alembic"),
    ("sqlalchemy", "import pgsteady.sqlalchemy", "sqlalchemy"),
    ("rich", "import pgsteady.lab.scenarios.pool_drain_report", "cli"),
])
def test_more_of_the_api_without_its_extra(tmp_path, hidden, code, extra):
    """The migrate API, the SQLAlchemy adapter and the lab's tables name their extra too."""
    check = ("try:\n    " + code + "\nexcept ImportError as exc:\n"
             "    print(type(exc).__name__, exc.name, exc)\n")
    out = _run([hidden], check, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"MissingExtra {hidden} "), out.stdout
    assert f"pip install 'pgsteady[{extra}]'" in out.stdout


def test_the_pre_commit_hook_installs_the_cli_extra():
    """pre-commit installs the repository alone (`pip install .`): the hook's
    additional_dependencies are the `cli` extra, or `pgsteady lint` would only print its hint."""
    import tomllib

    import yaml

    root = Path(SRC).parent
    (hook,) = yaml.safe_load((root / ".pre-commit-hooks.yaml").read_text())
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert hook["additional_dependencies"] == extras["cli"]
