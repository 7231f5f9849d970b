"""Options that were renamed: the old spelling still works for a while, hidden from ``--help``,
and says once on stderr what it is called now (``--runner`` and ``--layout`` are ``--tool``).

Only :mod:`argparse` here: ``pgsteady lint`` imports it and must start fast.
"""

from __future__ import annotations

import argparse
import sys

TYPE_CHECKING = False  # typing is left out of lint's start-up; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

#: Where the notes said during this parse are kept on the namespace (lint records them with
#: its output, so a replayed run says them too).
NOTES = "renamed_notes"


def note(old: str, new: str) -> str:
    """The one line an old option's use prints."""
    return f"note: {old} is now {new}; {old} will be removed in a later release\n"


class Renamed(argparse.Action):
    """Store the value under the new option's ``dest`` and say the option's new name."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str = "",
                 **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        said = note(option_string or self.option_strings[0], self.new)
        notes: list[str] = getattr(namespace, NOTES, None) or []
        if said not in notes:
            notes.append(said)
            sys.stderr.write(said)
        setattr(namespace, NOTES, notes)


def add_alias(parser: argparse.ArgumentParser, old: str, new: str, dest: str,
              **kwargs: Any) -> None:
    """``old`` as a hidden spelling of ``new`` (same ``dest`` and checks, no help line)."""
    parser.add_argument(old, action=Renamed, new=new, dest=dest, help=argparse.SUPPRESS,
                        default=argparse.SUPPRESS, **kwargs)


def said(args: argparse.Namespace) -> str:
    """The notes this parse printed, as one text."""
    return "".join(getattr(args, NOTES, None) or [])
