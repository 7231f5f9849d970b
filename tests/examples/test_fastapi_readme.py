"""examples/fastapi/README.md, run as a newcomer runs it: its own commands, in their order."""

from __future__ import annotations

import json
import shlex
import subprocess

from readme_run import EXAMPLES, commands, curl, env, free_port, lab_up, stop


def test_the_readme_commands_give_the_answers_it_promises() -> None:
    """Set-up, run and curl lines of the README: the service starts on a fresh database
    (creating its table) and the three curls answer as the README says."""
    lines = commands("fastapi")
    assert any(c.startswith("pip install") for c in lines)  # the set-up is written down
    (export,) = [c for c in lines if c.startswith("export PGSTEADY_DSN=")]
    (serve,) = [c for c in lines if c.startswith("uvicorn ")]
    curls = [c for c in lines if c.startswith("curl ")]
    assert len(curls) == 3 and "pooled:" in export
    port = free_port()
    with lab_up("fastapi") as dsns:
        server = subprocess.Popen(shlex.split(serve.replace("8000", str(port))),
                                  cwd=EXAMPLES / "fastapi", env=env(PGSTEADY_DSN=dsns["pooled"]),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
        try:
            answers = [json.loads(curl(line, port)) for line in curls]
        finally:
            stop(server)
    assert answers[0] == {"id": 1, "name": "kettle", "price_cents": 2500, "stale": False}
    assert answers[1] == {"id": 1, "price_cents": 2600}
    assert answers[2]["status"] == "pass"
