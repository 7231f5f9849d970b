"""Command-line options from a config record's knobs (:mod:`pgsteady.lab.knobs`), and the
record back from the parsed options: the lab's scenarios and the model declare their options
once, on their config, and ``lab`` and ``sim`` derive theirs from it."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping
from typing import Any

from pgsteady.cli import _args
from pgsteady.lab.knobs import Knob, Unit, describe_default, knobs, option_name


def share(text: str) -> float:
    """``"0.6"``: a share between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share; write it like 0.6") \
            from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and 1")
    return value


def times(text: str) -> tuple[float, ...]:
    """``"2s,6s"`` -> (2.0, 6.0)."""
    return tuple(_args.duration(part) for part in text.split(",") if part.strip())


def rate_stalls(text: str) -> tuple[float, float]:
    """``"0.2/s:50ms"`` -> (0.2 stalls a second, 0.05 s mean length)."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*/\s*s\s*:\s*(\S+)\s*$", text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a stall rate; write it like 0.2/s:50ms (rate/s:mean length)")
    return float(m[1]), _args.duration(m[2])


def _strategies(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


_TYPES: dict[Unit, Callable[[str], Any]] = {
    "duration": _args.duration, "count": _args.non_negative_int, "integer": int,
    "share": share, "text": str, "times": times, "strategies": _strategies,
    "burst": _args.burst, "stall": _args.stall, "rate_stalls": rate_stalls,
}


def add_options(parser: argparse.ArgumentParser, config: type,
                defaults: Mapping[str, Any] | None = None) -> None:
    """One option per knob of ``config``. An option left out stays None (the record's own
    default then applies), unless ``defaults`` gives this command another (by field name)."""
    overrides = dict(defaults or {})
    choices = getattr(config, "STRATEGY_CHOICES", ())
    for f, k in knobs(config):
        shown = describe_default(config, f, k, overrides.get(f.name))
        text = k.help
        if k.unit == "strategies":
            text = f"{k.help}: {', '.join(choices)}"
        if shown:
            text += f" (default: {shown})" if k.unit in ("strategies", "burst") else \
                f" ({shown})"
        option = option_name(f, k)
        kwargs: dict[str, Any] = {"dest": f.name, "help": text.replace("%", "%%"),
                                  "default": overrides.get(f.name)}
        if k.unit == "flag":
            parser.add_argument(option, action="store_true", **kwargs)
        else:
            parser.add_argument(option, type=_TYPES[k.unit],
                                metavar=option.lstrip("-").upper().replace("-", "_"), **kwargs)


def given(config: type, args: argparse.Namespace) -> dict[str, Any]:
    """The config's fields the command line set (a burst or stall sets several)."""
    out: dict[str, Any] = {}
    for f, k in knobs(config):
        value = getattr(args, f.name, None)
        if value is None:
            continue
        if k.parts:
            out.update(zip(k.parts, _parts(k, value), strict=True))
        else:
            out[f.name] = value
    return out


def _parts(k: Knob, value: Any) -> tuple[Any, ...]:
    if isinstance(value, _args.Burst):
        return (value.workers, value.start, value.end)
    if isinstance(value, _args.Stall):
        return (value.length, value.at)
    return tuple(value)
