"""``pgsteady sim``: the pool-drain model (``pool-drain``), its check against the lab
(``validate``) and maps of where pools collapse (``phase-map``)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from pgsteady._docs import POOL_DRAIN
from pgsteady.cli import _args
from pgsteady.cli import _knobs as knob_options
from pgsteady.errors import EXIT_FAILURE, EXIT_OK, UsageError


def register(verbs: Any) -> None:
    sim = verbs.add_parser("sim", help="the pool-drain model: run it, check it, map it")
    commands = sim.add_subparsers(dest="sim_command", metavar="COMMAND", required=True)

    drain = commands.add_parser(
        "pool-drain", help="the lab's pool-drain scenario, in the model",
        description="Run the pool-drain scenario in the discrete-event model: the lab's knobs "
                    f"and defaults (the outage's setting, {POOL_DRAIN}), plus several "
                    "poolers, max_connections and random stalls. Prints the lab's tables; "
                    "--json writes the lab's shape with \"source\": \"sim\". Same --seed, "
                    "same output.")
    _knobs(drain)
    drain.add_argument("--json", metavar="FILE", help="write the results as JSON")
    drain.add_argument("--out", metavar="DIR", help="write JSON and PNG charts to DIR")
    drain.set_defaults(run=run_pool_drain)

    check = commands.add_parser(
        "validate", help="run a grid in the lab and in the model and compare them",
        description="Pool size {2, 4, 20} x connect latency {10, 50 ms} x {naive, steady}, "
                    "3 short lab runs each (a 100 ms stall during the burst at pool 20, as "
                    "in the outage's write-up), and the same in the model; prints verdicts, "
                    "answered/s per third and server connections opened, lab vs model. "
                    "Exits 1 if "
                    "fewer than 90% of verdicts agree or answered/s differs by more than "
                    "10% where both hold. Takes about 10 minutes (--quick: about 1).")
    check.add_argument("--quick", action="store_true",
                       help="two cells (pool 2 and 4, 50 ms), one 6 s run per strategy")
    check.add_argument("--seed", type=int, default=1)
    check.add_argument("--json", metavar="FILE", nargs="?", const="",
                       help="write the comparison as JSON to FILE; with no FILE, into --out "
                            "DIR, or on stdout instead of the table")
    check.add_argument("--out", metavar="DIR",
                       help="write the comparison to DIR/sim-validate.json (the table still "
                            "goes to stdout)")
    check.add_argument("--dir", help="where to create the lab directory (default: temp dir)")
    check.set_defaults(run=run_validate)

    phase = commands.add_parser(
        "phase-map", help="probability of collapse over two knobs, as PNG heatmaps",
        description="Run the model over a grid of two knobs (any of: pool-size, "
                    "connect-latency, deadline, burst, query-time, poolers, workers, "
                    "query-wait-timeout, think-time) and write, per strategy, a heatmap of "
                    "the probability of collapse with the base setting marked, and the JSON "
                    "behind it.")
    phase.add_argument("--x", default="pool-size=2:40", help="pool-size=2:40 (default)")
    phase.add_argument("--y", default="connect-latency=5ms:200ms",
                       help="connect-latency=5ms:200ms (default)")
    phase.add_argument("--steps", type=_args.positive_int, default=8,
                       help="values per axis (8)")
    phase.add_argument("--jobs", type=_args.positive_int, default=1,
                       help="processes to spread the cells over (1)")
    _knobs(phase, runs=20)
    phase.add_argument("--out", metavar="DIR", default="phase-map",
                       help="where the PNGs and phase-map.json go (./phase-map)")
    phase.set_defaults(run=run_phase_map)


def _knobs(parser: argparse.ArgumentParser, runs: int = 1) -> None:
    """The model's knobs, declared on its config record: the lab's (same names, defaults and
    help), then its own."""
    from pgsteady.sim.config import SimConfig

    knob_options.add_options(parser, SimConfig, defaults={"runs": runs} if runs != 1 else None)


def _config(args: argparse.Namespace) -> Any:
    from pgsteady.sim.config import SimConfig

    return SimConfig(**knob_options.given(SimConfig, args))


def _check_paths(*paths: str | None, directory: str | None = None) -> None:
    for path in filter(None, paths):
        parent = Path(path).resolve().parent
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"{parent} is not a directory; choose another --json path")
    if directory and Path(directory).exists() and not Path(directory).is_dir():
        raise UsageError(f"{directory} is not a directory; choose another --out")


def run_pool_drain(args: argparse.Namespace) -> int:
    from pgsteady.cli._console import console
    from pgsteady.cli.lab import write_outputs
    from pgsteady.lab.scenarios import pool_drain_report as report
    from pgsteady.sim.run import run_model

    config = _config(args)
    _check_paths(args.json, directory=args.out)
    err = console(stderr=True)
    started = time.perf_counter()
    result = run_model(config)
    out = console()
    for table in report.tables(result):
        out.print(table)
    err.print(f"model: {len(result.runs)} run(s) of {config.duration:g} simulated s in "
              f"{time.perf_counter() - started:.2f} s of wall time")
    write_outputs(report, result, args, "pool-drain.json")
    return EXIT_OK


def run_validate(args: argparse.Namespace) -> int:
    from pgsteady.cli._console import console
    from pgsteady.lab.scenarios.pool_drain import run_pool_drain as lab_run
    from pgsteady.sim import validate as check
    from pgsteady.sim.report import validation_table

    json_path = _validate_json_path(args.json, args.out)
    _check_paths(None if json_path == "-" else json_path, directory=args.out)
    err = console(stderr=True)
    grid = check.QUICK if args.quick else check.FULL
    result = check.validate(grid, lambda config: lab_run(config, base_dir=args.dir,
                                                         hold_sample=True),
                            seed=args.seed, progress=err.print)
    document = result.to_json()
    if json_path == "-":
        print(json.dumps(document, indent=2))
    else:
        console().print(validation_table(result))
    if json_path and json_path != "-":
        path = Path(json_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n")
        err.print(f"wrote {json_path}")
    return EXIT_OK if result.passed else EXIT_FAILURE


def _validate_json_path(json_file: str | None, out: str | None) -> str | None:
    """Where ``validate`` writes its JSON: --json FILE, else DIR/sim-validate.json with
    --out DIR, else "-" (stdout) for a bare --json, else nowhere."""
    if json_file:
        return json_file
    if out:
        return str(Path(out) / "sim-validate.json")
    return "-" if json_file == "" else None


def run_phase_map(args: argparse.Namespace) -> int:
    from pgsteady.cli._console import console
    from pgsteady.sim import phase_map
    from pgsteady.sim.report import phase_map_tables, write_phase_map

    config = _config(args)
    x = phase_map.parse_axis(args.x, args.steps, config)
    y = phase_map.parse_axis(args.y, args.steps, config)
    _check_paths(directory=args.out)
    err = console(stderr=True)
    started = time.perf_counter()
    result = phase_map.run_phase_map(
        config, x, y, jobs=args.jobs,
        progress=lambda done, total: err.print(f"cell {done}/{total}") if err.is_terminal
        else None)
    for table in phase_map_tables(result):
        console().print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "phase-map.json").write_text(json.dumps(result.to_json(), indent=2) + "\n")
    err.print(f"wrote {out / 'phase-map.json'} ({time.perf_counter() - started:.1f} s)")
    for path in write_phase_map(result, out):
        err.print(f"wrote {path}")
    return EXIT_OK
