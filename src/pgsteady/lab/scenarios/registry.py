"""The lab's scenarios, as a list: what ``pgsteady lab`` builds its sub-commands from.

Each scenario module declares one :class:`Scenario` (``SCENARIO``): its name and help, its
config record (whose :func:`pgsteady.lab.knobs.knob` fields are its options), the function
that runs it and the report module beside it (terminal tables, PNG charts, JSON). A new
scenario is a module here with a ``SCENARIO`` and a line in :data:`MODULES`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

MODULES = ("pgsteady.lab.scenarios.pool_drain", "pgsteady.lab.scenarios.lock_queue")

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class Scenario:
    name: str                     # the sub-command: pgsteady lab <name>
    help: str                     # one line for `pgsteady lab --help`
    description: str              # its own --help
    config: type                  # a frozen dataclass; its knob fields are the options
    run: Callable[..., Any]       # run(config, progress, base_dir=...) -> result
    report: str                   # module with tables(result), write_json and write_charts
    seconds: Callable[[Any], float]  # the run's expected length, for the progress bar
    # Turns the options given into the config's fields, where one depends on another
    # (pool-drain: no burst with --cold-start unless one is given).
    prepare: Callable[[dict[str, Any]], dict[str, Any]] = dict

    @property
    def json_name(self) -> str:
        return f"{self.name}.json"

    def report_module(self) -> ModuleType:
        """Imported when a result is shown: the report imports the scenario, not the reverse."""
        return importlib.import_module(self.report)


def scenarios() -> list[Scenario]:
    return [importlib.import_module(name).SCENARIO for name in MODULES]
