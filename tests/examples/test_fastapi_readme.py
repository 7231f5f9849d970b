"""examples/fastapi/README.md, run as a newcomer runs it: its own commands, in their order."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fastapi"
BIN = Path(sys.executable).parent


def _commands() -> list[str]:
    """Every line of the README's ``sh`` blocks, in order."""
    text = (EXAMPLE / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture
def lab_up() -> Iterator[str]:
    """``pgsteady lab up`` as the README runs it; yields the ``pooled:`` DSN it printed."""
    (command,) = [c for c in _commands() if c.startswith("pgsteady lab up")]
    process = subprocess.Popen(shlex.split(command),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env=_env())
    try:
        assert process.stdout is not None
        pooled = ""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            if line.startswith("pooled:"):
                pooled = line.split(":", 1)[1].strip()
            if line.startswith("logs:"):
                break
        assert pooled, "pgsteady lab up printed no pooled: DSN"
        yield pooled
    finally:
        _stop(process)


def test_the_readme_commands_give_the_answers_it_promises(lab_up: str) -> None:
    """Set-up, run and curl lines of the README: the service starts on a fresh database
    (creating its table) and the three curls answer as the README says."""
    commands = _commands()
    assert any(c.startswith("pip install") for c in commands)  # the set-up is written down
    (export,) = [c for c in commands if c.startswith("export PGSTEADY_DSN=")]
    (serve,) = [c for c in commands if c.startswith("uvicorn ")]
    curls = [c for c in commands if c.startswith("curl ")]
    assert len(curls) == 3
    port = _free_port()
    env = _env() | {"PGSTEADY_DSN": lab_up}
    assert export.split("=", 1)[0] == "export PGSTEADY_DSN"
    server = subprocess.Popen(shlex.split(serve.replace("8000", str(port))), cwd=EXAMPLE,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    try:
        answers = []
        for curl in curls:
            argv = [*shlex.split(curl.replace("8000", str(port))), "--retry", "30",
                    "--retry-connrefused", "--retry-delay", "1", "--max-time", "20"]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                                  check=False)
            assert done.returncode == 0, (curl, done.stderr)
            answers.append(json.loads(done.stdout))
    finally:
        _stop(server)
    assert answers[0] == {"id": 1, "name": "kettle", "price_cents": 2500, "stale": False}
    assert answers[1] == {"id": 1, "price_cents": 2600}
    assert answers[2]["status"] == "pass"
