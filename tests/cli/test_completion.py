"""`pgsteady completion bash`: a static script, generated from the parser, that completes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pgsteady.cli import VERBS, main

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

ASK = """
t() {{ COMP_WORDS=("$@"); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); _pgsteady; echo "${{COMPREPLY[*]}}"; }}
{calls}
"""


def _complete(capsys: pytest.CaptureFixture[str], *lines: list[str]) -> list[str]:
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    calls = "\n".join("t pgsteady " + " ".join(f"'{w}'" for w in words) for words in lines)
    out = subprocess.run(["bash", "-c", script + ASK.format(calls=calls)], capture_output=True,
                         text=True, timeout=30, check=True)
    return out.stdout.splitlines()


def test_completes_verbs_sub_verbs_options_and_choices(capsys):
    """Verbs, a verb's sub-verbs, its options (after other options and their values), and
    an option's fixed choices."""
    verbs, lab, strategy, formats, after_values = _complete(
        capsys, [""], ["lab", ""], ["lab", "pool-drain", "--str"], ["lint", "--format", ""],
        ["-v", "lint", "--dsn", "x", "--fo"])
    assert verbs.split() == list(VERBS)
    assert lab.split() == ["up", "pool-drain", "lock-queue"]
    assert strategy == "--strategy"
    assert formats.split() == ["text", "json", "github"]
    assert after_values == "--format"



def test_lint_tool_completes_the_tools_lint_knows(capsys):
    """``lint --tool <TAB>`` offers the tools (its values are checked by lint itself, not by
    argparse's choices, so the script must still know them)."""
    (tools,) = _complete(capsys, ["lint", "--tool", "go"])
    assert tools.split() == ["goose", "golang-migrate"]


def test_the_start_pages_install_line_works_in_a_fresh_home(tmp_path):
    """The Start page's completion install line, run with a HOME that has no bash-completion
    folder yet, installs a script that completes."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "index.md").read_text()
    (block,) = [b for b in re.findall(r"```sh\n(.*?)```", page, flags=re.DOTALL)
                if "pgsteady completion bash" in b]
    env = {**os.environ, "HOME": str(tmp_path),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", "-e", "-c", block], env=env, check=True, timeout=60)
    installed = tmp_path / ".local/share/bash-completion/completions/pgsteady"
    ask = ASK.format(calls="t pgsteady lint --fo")
    out = subprocess.run(["bash", "-c", f"source {installed}\n{ask}"], capture_output=True,
                         text=True, timeout=30, check=True)
    assert out.stdout.split() == ["--format"]
