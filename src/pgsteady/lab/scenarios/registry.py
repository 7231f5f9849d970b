"""The lab's scenarios, as a list: what ``pgsteady lab`` builds its sub-commands from.

Each scenario module declares one :class:`Scenario` (``SCENARIO``): its name and help, its
config record (whose :func:`pgsteady.lab.knobs.knob` fields are its options), the function
that runs it and the report module beside it (terminal tables, PNG charts, JSON). Its section
of ``pgsteady report``'s HTML page is ``<module>_html.section`` beside it. A new scenario is
those modules and its line in :data:`MODULES`.

This module imports nothing of pgsteady's: ``pgsteady report`` reads it to find a section
without loading the lab (psycopg, the cluster).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

MODULES = {
    "pool-drain": "pgsteady.lab.scenarios.pool_drain",
    "lock-queue": "pgsteady.lab.scenarios.lock_queue",
}
"""Each scenario's name (``pgsteady lab <name>``, the JSON's ``scenario``) and its module."""

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
    return [importlib.import_module(module).SCENARIO for module in MODULES.values()]


def html_section(name: str) -> Callable[[Any, str], str] | None:
    """The scenario ``name``'s HTML section renderer (``section(result, anchor)``), imported
    on use; None for a name that is not a lab scenario (a file from elsewhere)."""
    module = MODULES.get(name)
    if module is None:
        return None
    section: Callable[[Any, str], str] = importlib.import_module(f"{module}_html").section
    return section
