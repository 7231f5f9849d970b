"""Knobs: a config record's fields that are also command-line options, declared once.

A scenario's (or the model's) config is a frozen dataclass; a field made with :func:`knob`
carries its unit and its help, and the field's default is the only default. The CLI
(:mod:`pgsteady.cli._knobs`) turns those fields into argparse options and the parsed options
back into the record, so a name, default, unit or help is written in one place however many
commands show it (issue 28: the pool-drain knobs were copied in four). Fields made without
:func:`knob` are settings no option reaches. Nothing here imports argparse or the CLI.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields
from typing import Any, Literal

from pgsteady import _majors

# How an option is written, and what it sets:
#   duration: 50ms, 1.5s; count: a whole number >= 0; integer: any whole number;
#   share: 0..1; flag: present or not; text: as given; times: 2s,6s (a tuple of seconds);
#   strategies: naive,steady (a tuple of names); and three that set several fields (parts):
#   burst: 30@5s-10s (workers, start, end); stall: 100ms@7s (length, at);
#   rate_stalls: 0.2/s:50ms (rate, mean length).
Unit = Literal["duration", "count", "integer", "share", "flag", "text", "times", "strategies",
               "burst", "stall", "rate_stalls"]


@dataclass(frozen=True)
class Knob:
    unit: Unit
    help: str
    option: str = ""                 # default: --field-name
    parts: tuple[str, ...] = ()      # the fields a burst, stall or rate_stalls sets, in order
    default_text: str = ""           # how the default reads in --help, when not the value's


def knob(default: Any, unit: Unit, help: str, *, option: str = "",
         parts: tuple[str, ...] = (), default_text: str = "") -> Any:
    """A dataclass field that is also an option; ``help`` says what it does and why, without
    the default (which ``--help`` adds from ``default``)."""
    return field(default=default, metadata={"knob": Knob(unit, help, option, parts,
                                                         default_text)})


def knobs(cls: type) -> list[tuple[Field[Any], Knob]]:
    """The fields of ``cls`` that are options, in declaration order, the lab server's own
    (:class:`ClusterKnobs`) last."""
    found = [(f, f.metadata["knob"]) for f in fields(cls) if "knob" in f.metadata]
    server = {f.name for f in fields(ClusterKnobs)}
    return sorted(found, key=lambda pair: pair[0].name in server)


def option_name(f: Field[Any], k: Knob) -> str:
    return k.option or "--" + f.name.replace("_", "-")


def describe_default(cls: type, f: Field[Any], k: Knob, value: Any = None) -> str:
    """The default as an option would be written: ``50ms``, ``30@5s-10s``, ``naive,steady``;
    "" for flags and for defaults the help describes itself (None)."""
    if k.default_text:
        return k.default_text
    value = f.default if value is None else value
    if k.unit == "flag" or value is None:
        return ""
    if k.parts:
        values = [value, *(_field(cls, name).default for name in k.parts[1:])]
        if k.unit == "burst":
            return "0" if not values[0] else \
                f"{values[0]}@{seconds_text(values[1])}-{seconds_text(values[2])}"
        if k.unit == "stall":
            return "" if not values[0] else f"{seconds_text(values[0])}@{seconds_text(values[1])}"
        return "" if not values[0] else f"{values[0]:g}/s:{seconds_text(values[1])}"
    if k.unit == "duration":
        return seconds_text(value)
    if k.unit == "times":
        return ",".join(seconds_text(v) for v in value)
    if k.unit == "strategies":
        return ",".join(value)
    return str(value)


def seconds_text(value: float) -> str:
    """0.05 -> ``50ms``, 15.0 -> ``15s``."""
    return f"{value * 1000:g}ms" if 0 < value < 1 else f"{value:g}s"


def _field(cls: type, name: str) -> Field[Any]:
    return next(f for f in fields(cls) if f.name == name)


@dataclass(frozen=True)
class ClusterKnobs:
    """The options of the lab's own PostgreSQL, which every scenario (and ``lab up``) takes.
    A new one (``--pg-version``) goes here, once, and reaches all of them."""

    durable: bool = knob(False, "flag",
                         "run PostgreSQL with fsync and synchronous_commit on (the lab turns "
                         "them off for speed: a crash or an immediate stop then loses commits "
                         "callers were told had succeeded)")
    pg_version: int | None = knob(None, "count",
                                  f"run PostgreSQL major N ({min(_majors.SUPPORTED)}-"
                                  f"{max(_majors.SUPPORTED)}, or "
                                  f"{min(_majors.PAST_END_OF_LIFE)}-"
                                  f"{max(_majors.PAST_END_OF_LIFE)} past their end of life; "
                                  "scripts/postgres-versions.sh installs them; default: the "
                                  "system's)")
