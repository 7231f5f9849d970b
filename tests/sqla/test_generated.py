"""Steady is generated from AsyncSteady's source: the checked-in sync module is exactly what
scripts/async_to_sync.py makes of it, so a change to one side only fails here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "async_to_sync.py"


def _script():
    spec = importlib.util.spec_from_file_location("async_to_sync", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sync_module_is_the_generated_one_byte_for_byte():
    """Regenerate _sqla_sync.py from _sqla_async.py and compare."""
    script = _script()
    made = script.generate(script.SOURCE.read_text(encoding="utf-8"))
    assert script.TARGET.read_text(encoding="utf-8") == made, \
        "src/pgsteady/_sqla_sync.py is out of date: run scripts/async_to_sync.py"


def test_the_check_fails_on_a_hand_edit(tmp_path, monkeypatch):
    """--check exits 1 when the sync module was edited by hand, 0 when it is current."""
    script = _script()
    edited = tmp_path / "_sqla_sync.py"
    edited.write_text(script.TARGET.read_text(encoding="utf-8") + "# a hand edit\n")
    monkeypatch.setattr(script, "TARGET", edited)
    monkeypatch.setattr(script, "ROOT", tmp_path)
    assert script.main(["--check"]) == 1
    edited.write_text(script.generate(script.SOURCE.read_text(encoding="utf-8")))
    assert script.main(["--check"]) == 0


def test_the_transformation_maps_async_to_sync():
    """async/await dropped, names mapped, ASYNC blocks resolved to their else part."""
    source = '''"""doc"""
import asyncio  # async only
import threading


class AsyncSteady:
    async def aclose(self) -> None:
        if True:  # ASYNC
            await asyncio.sleep(0)
        else:
            threading.Event().wait(0)
        async with self._ready:
            await self.run(AsyncSession)
'''
    made = _script().generate(source)
    code = made.split('"""', 2)[2]  # after the generated module's docstring
    assert "asyncio" not in code and "async " not in code and "await" not in code
    assert "class Steady:" in made and "def close(self)" in made
    assert "        threading.Event().wait(0)\n" in made
    assert "        with self._ready:\n            self.run(Session)\n" in made
    compile(made, "generated", "exec")


def test_the_script_runs_as_a_command():
    """python scripts/async_to_sync.py --check exits 0 on the checked-in tree."""
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
