"""`pgsteady lab` builds its scenarios' sub-commands from the registry, and the pool-drain knobs
have one record: the lab's and the model's options, defaults and help all come from it."""

from __future__ import annotations

import argparse
from dataclasses import fields

import pytest

from pgsteady.cli import _knobs, build_parser
from pgsteady.lab.knobs import ClusterKnobs, knobs, option_name
from pgsteady.lab.scenarios.lock_queue import LockQueueConfig
from pgsteady.lab.scenarios.pool_drain import PoolDrainConfig, PoolDrainKnobs
from pgsteady.lab.scenarios.registry import scenarios
from pgsteady.sim.config import SimConfig


def _sub(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser(argv[0]).parse_args(list(argv))


def test_lab_sub_commands_are_the_registry_s_scenarios():
    """Every registered scenario is a `lab` sub-command with its config's knobs as options,
    the output options, and the lab server's (--durable) that `lab up` takes too."""
    lab = _sub(build_parser("lab"), "lab")
    action = next(a for a in lab._actions if isinstance(a, argparse._SubParsersAction))
    assert set(action.choices) == {"up", *(s.name for s in scenarios())}
    for scenario in scenarios():
        options = _options(action.choices[scenario.name])
        assert {option_name(f, k) for f, k in knobs(scenario.config)} <= options
        assert {"--json", "--out", "--dir", "--durable"} <= options
        assert issubclass(scenario.config, ClusterKnobs)
    assert "--durable" in _options(action.choices["up"])


@pytest.mark.parametrize(("argv", "config"), [(("lab", "pool-drain"), PoolDrainConfig),
                                              (("lab", "lock-queue"), LockQueueConfig),
                                              (("sim", "pool-drain"), SimConfig)])
def test_no_options_give_the_record_s_defaults(argv, config):
    """An empty command line builds exactly the config record's defaults."""
    args = _parse(*argv)
    scenario = next((s for s in scenarios() if s.config is config), None)
    given = _knobs.given(config, args)
    assert given == {}
    assert (scenario.config(**scenario.prepare(given)) if scenario else config()) == config()


def test_lab_and_model_share_the_pool_drain_knobs():
    """The lab's and the model's pool-drain options have the same names, defaults and help,
    and the help shows the record's default."""
    shared = [f.name for f in fields(PoolDrainKnobs)]
    lab, model = PoolDrainConfig(), SimConfig()
    assert all(getattr(lab, name) == getattr(model, name) for name in shared
               if name != "min_pool_size")
    lab_help = {a.dest: a.help for a in _sub(build_parser("lab"), "lab", "pool-drain")._actions}
    sim_help = {a.dest: a.help for a in _sub(build_parser("sim"), "sim", "pool-drain")._actions}
    for name in ("pool_size", "connect_latency", "deadline", "burst_workers", "overcommit"):
        assert lab_help[name] == sim_help[name], name
    assert lab_help["connect_latency"].endswith("(50ms)")
    assert lab_help["burst_workers"].endswith("(default: 30@5s-10s)")
    assert "steady-async" in lab_help["strategies"] and "steady-async" not in \
        sim_help["strategies"]


def test_options_set_the_fields_they_name():
    """A burst, a stall and random stalls set their several fields; --cold-start without a
    burst means none, and no pre-filled pool."""
    args = _parse("lab", "pool-drain", "--burst", "10@1s-2s", "--stall", "100ms@3s",
                  "--strategy", "naive", "--durable")
    config = PoolDrainConfig(**_knobs.given(PoolDrainConfig, args))
    assert (config.burst_workers, config.burst_start, config.burst_end) == (10, 1.0, 2.0)
    assert (config.stall, config.stall_at, config.strategies) == (0.1, 3.0, ("naive",))
    assert config.durable and config.min_pool_size == config.pool_size
    pool_drain = next(s for s in scenarios() if s.name == "pool-drain")
    cold = pool_drain.config(**pool_drain.prepare(_knobs.given(
        PoolDrainConfig, _parse("lab", "pool-drain", "--cold-start"))))
    assert (cold.burst_workers, cold.min_pool_size) == (0, 0)
    model = SimConfig(**_knobs.given(SimConfig, _parse("sim", "pool-drain", "--latency-stalls",
                                                       "0.2/s:50ms", "--seed", "7")))
    assert (model.stall_rate, model.stall_mean, model.seed) == (0.2, 0.05, 7)
    assert _parse("sim", "phase-map").runs == 20 and _parse("sim", "pool-drain").runs is None
