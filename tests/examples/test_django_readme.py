"""examples/django/README.md, run as a newcomer runs it: its own commands, in their order."""

from __future__ import annotations

import json
import shlex
import subprocess

import psycopg
from readme_run import EXAMPLES, commands, curl, env, free_port, lab_up, stop


def test_the_readme_migrates_serves_and_answers_as_it_says() -> None:
    """Lint and migrate on the direct DSN, the server through PgBouncer in transaction mode,
    and the three health curls answering "pass", as the README says."""
    lines = commands("django")
    assert any(c.startswith("pip install") for c in lines)
    exports = [c for c in lines if c.startswith("export DATABASE_DSN=")]
    assert len(exports) == 2 and "direct:" in exports[0] and "pooled:" in exports[1]
    assert "PGSTEADY_POOLER=transaction" in exports[1]
    manage = [c for c in lines if c.startswith("python manage.py")]
    lint, migrate, serve = manage
    curls = [c for c in lines if c.startswith("curl ")]
    assert len(curls) == 3
    port = free_port()
    with lab_up("django") as dsns:
        where = EXAMPLES / "django"
        direct = env(DATABASE_DSN=dsns["direct"])
        linted = subprocess.run(shlex.split(lint), cwd=where, env=direct, capture_output=True,
                                text=True, timeout=300, check=False)
        assert linted.returncode in (0, 1), linted.stderr  # 1: findings, as the README says
        subprocess.run(shlex.split(migrate), cwd=where, env=direct, check=True, timeout=300,
                       capture_output=True)
        with psycopg.connect(dsns["direct"]) as conn:
            assert conn.execute("select count(*) from django_migrations "
                                "where app = 'shop'").fetchone() == (3,)
        pooled = env(DATABASE_DSN=dsns["pooled"], PGSTEADY_POOLER="transaction")
        server = subprocess.Popen(shlex.split(serve.replace("8000", str(port))), cwd=where,
                                  env=pooled, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, text=True)
        try:
            answers = [json.loads(curl(line, port)) for line in curls]
        finally:
            stop(server)
    assert [a["status"] for a in answers] == ["pass", "pass", "pass"]
