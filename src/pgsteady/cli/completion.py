"""``pgsteady completion bash``: a completion script for bash (and zsh's bashcompinit).

The script is generated from the parser and is static: a TAB costs bash a ``case``, not a
Python start-up, and ``pgsteady`` itself starts no slower (no argcomplete hook to check on
every run). It completes verbs and sub-verbs, each command's options, and the values of
options with fixed choices; anything else falls back to file names.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Iterator
from typing import Any

from pgsteady.errors import EXIT_OK


def register(verbs: Any) -> None:
    completion = verbs.add_parser(
        "completion", help="print a shell completion script",
        description="Print a completion script for bash. Install it with "
                    "`mkdir -p ~/.local/share/bash-completion/completions && pgsteady "
                    "completion bash > ~/.local/share/bash-completion/completions/"
                    "pgsteady`, or `eval \"$(pgsteady completion bash)\"` in ~/.bashrc; in zsh, "
                    "run `autoload -U bashcompinit && bashcompinit` first.")
    completion.add_argument("shell", choices=["bash"], help="the shell (zsh: see above)")
    completion.set_defaults(run=run)


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) \
        -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:  # argparse keeps its sub-commands in a private type
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _values(action: argparse.Action) -> list[str]:
    """An argument's fixed values: its choices, or the ones a verb checks itself and lists in
    ``completions`` (``lint --tool``, whose own check gives a clearer error than argparse's)."""
    given = action.choices or getattr(action, "completions", None) or ()
    return [str(value) for value in given]


def _case(pattern: str, words: list[str]) -> str:
    return f"        {shlex.quote(pattern)}) echo {shlex.quote(' '.join(words))};;"


def script(parser: argparse.ArgumentParser) -> str:
    """The bash script for ``parser``'s whole tree of commands."""
    subs, options, choices = [], [], []
    for path, command in _commands(parser):
        key = " ".join(path)
        words = []  # what may come next that is not an option: sub-commands, fixed arguments
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                words += list(action.choices)
            elif not (values := _values(action)):
                continue
            elif not action.option_strings:
                words += values
            else:
                choices += [_case(f"{key}|{flag}", values) for flag in action.option_strings]
        if words:
            subs.append(_case(key, words))
        flags = [flag for action in command._actions for flag in action.option_strings
                 if flag.startswith("--") or not any(f.startswith("--")
                                                     for f in action.option_strings)]
        options.append(_case(key, sorted(flags)))
    nl = "\n"
    return f"""# bash completion for pgsteady (`pgsteady completion bash`); zsh: bashcompinit first
_pgsteady_subs() {{
    case "$1" in
{nl.join(subs)}
    esac
}}
_pgsteady_options() {{
    case "$1" in
{nl.join(options)}
    esac
}}
_pgsteady_choices() {{
    case "$1" in
{nl.join(choices)}
    esac
}}
_pgsteady() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} path="" word i
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${{COMP_WORDS[i]}}
        case " $(_pgsteady_subs "$path") " in
            *" $word "*) path="${{path:+$path }}$word";;
        esac
    done
    local values
    values=$(_pgsteady_choices "$path|$prev")
    if [ -n "$values" ]; then
        mapfile -t COMPREPLY < <(compgen -W "$values" -- "$cur")
    elif [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_pgsteady_options "$path")" -- "$cur")
    else
        mapfile -t COMPREPLY < <(compgen -W "$(_pgsteady_subs "$path")" -- "$cur")
    fi
}}
complete -o default -F _pgsteady pgsteady
"""


def run(args: argparse.Namespace) -> int:
    from pgsteady.cli import build_parser

    sys.stdout.write(script(build_parser()))
    return EXIT_OK
