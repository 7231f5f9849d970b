"""Reading the labs' and the model's JSON: every file checked up front, one clear line per fault.

A report is often built from a folder a colleague sent: a file that is not ours, cut short, or
from a newer pgsteady must fail naming the file and what is wrong, before anything is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgsteady.errors import UsageError

SUPPORTED_SCHEMA = 1
MAX_FILE_BYTES = 200 * 1024 * 1024  # a 10-run lab file is ~1 MB; refuse what cannot be one
#: The largest number a lab or model measures (ms, counts, rates stay far below): bigger
#: ones, Infinity and NaN are refused, as no chart can place them.
MAX_MAGNITUDE = 1e15
#: Longer strings (names, labels, error texts) are cut to this many characters with a note
#: saying how long they were: one 1 MB name, repeated in tables and legends, made a 55 MB page.
MAX_STRING = 2000


@dataclass(frozen=True)
class Result:
    """One lab or model result file: its scenario, where it came from, and its data."""

    path: Path
    scenario: str
    source: str          # "lab" or "sim"
    data: dict[str, Any]

    @property
    def runs(self) -> list[dict[str, Any]]:
        """The per-run results (a phase map's ``runs`` is a count, not a list: none here)."""
        runs = self.data.get("runs")
        return runs if isinstance(runs, list) else []


def collect(paths: list[str]) -> list[Path]:
    """The JSON files named, and those directly inside the folders named, in a stable order."""
    files: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.glob("*.json") if p.is_file())
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise UsageError(f"{name}: no such file or folder; give lab or sim JSON files or "
                             "the folders that hold them")
    unique = list(dict.fromkeys(p.resolve() for p in files))
    if not unique:
        raise UsageError(f"no JSON files in {', '.join(paths)}; run a lab with --json FILE or "
                         "--out DIR first")
    return unique


def load(path: Path) -> Result:
    """Parse and check one file; raises ``UsageError`` naming the file and the fault."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise UsageError(f"{path}: {size // (1024 * 1024)} MB is too large for a lab or "
                             "sim result; is it the right file?")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text, so not a lab or sim JSON file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: "
                         f"{exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # an integer of 5,000 digits, deep nesting
        raise UsageError(f"{path}: not a lab or sim result ({exc})") from None
    data = _checked(path, data)
    if not isinstance(data, dict) or "scenario" not in data:
        raise UsageError(f'{path}: not a pgsteady lab or sim result (no "scenario" field); '
                         "give files written by `pgsteady lab ... --json` or `pgsteady sim`")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise UsageError(f'{path}: "schema_version" is missing or not a number')
    if version != SUPPORTED_SCHEMA:
        raise UsageError(f"{path}: schema_version {version} is not supported (this pgsteady "
                         f"reads {SUPPORTED_SCHEMA}); use the pgsteady that wrote it")
    scenario = data["scenario"]
    if not isinstance(scenario, str) or not scenario:
        raise UsageError(f'{path}: "scenario" must be a name such as "pool-drain"')
    model_only = scenario in ("phase-map", "sim-validate") or scenario.startswith("sim-")
    source = data.get("source", "sim" if model_only else "lab")
    if source not in ("lab", "sim"):
        raise UsageError(f'{path}: "source" is {source!r}; expected "lab" or "sim"')
    runs = data.get("runs")
    if runs is not None and not (model_only and isinstance(runs, int)):
        if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
            raise UsageError(f'{path}: "runs" must be a list of objects')
        if not runs:
            raise UsageError(f'{path}: "runs" is empty: the run recorded no result; run the '
                             "lab again (or leave this file out)")
        for index, run in enumerate(runs, 1):
            per_second = run.get("per_second", [])
            if not isinstance(per_second, list) or not all(isinstance(r, dict)
                                                           for r in per_second):
                raise UsageError(f'{path}: run {index}: "per_second" must be a list of objects')
    return Result(path, scenario, source, data)


def _checked(path: Path, data: object) -> Any:
    """``data`` with every number finite and at most :data:`MAX_MAGNITUDE` (else a
    ``UsageError`` naming the field) and every string (and key) cut to :data:`MAX_STRING`
    characters with a note. Walked with a stack: nesting is json's limit, not this one's."""
    root: list[Any] = [data]
    stack: list[tuple[list[Any] | dict[str, Any], Any, str]] = [(root, 0, "")]
    while stack:
        holder, slot, where = stack.pop()
        value = holder[slot]
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            if not (-MAX_MAGNITUDE <= value <= MAX_MAGNITUDE):  # NaN fails both sides
                raise UsageError(f"{path}: field {where or 'top'} is {value!r}, not a number a "
                                 f"lab measures (finite, at most {MAX_MAGNITUDE:.0e}); is it "
                                 "the right file?")
        elif isinstance(value, str):
            holder[slot] = _cut(value)
        elif isinstance(value, list):
            stack.extend((value, index, f"{where}[{index}]") for index in range(len(value)))
        elif isinstance(value, dict):
            if any(len(key) > MAX_STRING for key in value):
                value = {_cut(key): item for key, item in value.items()}
                holder[slot] = value
            stack.extend((value, key, f"{where}.{key}" if where else key) for key in value)
    return root[0]


def _cut(value: str) -> str:
    if len(value) <= MAX_STRING:
        return value
    return f"{value[:MAX_STRING]}… [cut: {len(value):,} characters]"


def load_all(paths: list[str]) -> list[Result]:
    return [load(path) for path in collect(paths)]
