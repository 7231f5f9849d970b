"""`pgsteady completion bash`: a static script, generated from the parser, that completes."""

from __future__ import annotations

import shutil
import subprocess

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

