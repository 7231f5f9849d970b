"""Running an example's README as a newcomer runs it: its own ``sh`` lines, in their order."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BIN = Path(sys.executable).parent


def commands(example: str) -> list[str]:
    """Every line of the example's README's ``sh`` blocks, in order."""
    text = (EXAMPLES / example / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env(**more: str) -> dict[str, str]:
    """This environment with the test's virtualenv first on PATH, plus ``more``."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **more}


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@contextmanager
def lab_up(example: str) -> Iterator[dict[str, str]]:
    """The README's ``pgsteady lab up``, running; yields the DSNs it printed by name
    (``direct``, ``pooled``, ``admin``)."""
    (command,) = [c for c in commands(example) if c.startswith("pgsteady lab up")]
    process = subprocess.Popen(shlex.split(command), stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env=env())
    try:
        assert process.stdout is not None
        printed: dict[str, str] = {}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "logs" not in printed:
            line = process.stdout.readline()
            if not line:
                break
            name, _, value = line.partition(":")
            printed[name.strip()] = value.strip()
        assert printed.get("pooled") and printed.get("direct"), printed
        yield printed
    finally:
        stop(process)


def curl(line: str, port: int) -> str:
    """One of the README's curl lines against ``port``, retried while the server starts."""
    argv = [*shlex.split(line.replace("8000", str(port))), "--retry", "30",
            "--retry-connrefused", "--retry-delay", "1", "--max-time", "20"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, (line, done.stderr)
    return done.stdout
