"""Every cross-field refusal suggests only values that are possible: each ``-cp key=value`` (or
``TMI_START_TIMEOUT_S=value``) it names passes that field's own rule and, applied, ends the refusal.

It walks every ``validation_problems`` method of the built-in configuration (the core's, TrackMania's
environment section's and TrackMania's whole configuration's, found by grep so a new one fails here
until it has a case) and the real game's watchdog check (``check_collector_timeout``), which once
suggested "lower environment.timeout_during_run_ms to at most -29000" for a 1 s watchdog.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig
from environments.trackmania.training.trackmania_graph_manager import check_collector_timeout
from rulka.config import ConfigError, apply_dict, parse_override
from rulka.schedules import Schedule
from rulka.validation import config_problems

ROOT = Path(__file__).resolve().parents[4]
SUGGESTION = re.compile(r"\(-cp ([\w.]+)=([^)\s]+)\)")
ENV_SUGGESTION = re.compile(r"\((TMI_START_TIMEOUT_S)=([^)\s]+)\)")

#: Every validation_problems method in the code, as (file, the class it is in).
WALKED = {("rulka/parameters.py", "ExperimentConfig"),
          ("environments/trackmania/parameters.py", "TrackManiaEnvironmentParameters"),
          ("environments/trackmania/training/experiment_parameters.py", "TrackManiaExperimentConfig")}


def _config(**changes) -> TrackManiaExperimentConfig:
    config = TrackManiaExperimentConfig()
    for key, value in changes.items():
        section, name = key.split("__")
        setattr(getattr(config, section), name, value)
    return config


def _capacity(capacity: int) -> Schedule:
    return Schedule([(0, (capacity, min(capacity, 2)))], "staircase")


#: Each cross-field refusal, broken on purpose: (what the message starts with, the configuration).
CASES = {
    "environment.shaped_reward_min_dist_to_cur_vcp": _config(environment__shaped_reward_min_dist_to_cur_vcp=30.0),
    "environment.temporal_mini_race_duration_ms": _config(environment__temporal_mini_race_duration_ms=20),
    "environment.reward_on_missed_gate": _config(environment__missed_gate_ends_race=True,
                                                 environment__reward_on_missed_gate=0.0),
    # a bound that rounds upwards at 4 digits (-8.64149 -> -8.641): the suggestion must not
    "environment.reward_on_missed_gate ": _config(environment__missed_gate_ends_race=True,
                                                  environment__reward_on_missed_gate=-8.0,
                                                  environment__constant_reward_per_ms=-0.00123449857),
    "environment.float_inputs_mean": _config(environment__float_inputs_mean=[0.0]),
    "environment.float_inputs_std": _config(environment__float_inputs_std=[1.0]),
    "memory.memory_size_schedule.points[0]": _config(training__n_steps=10, memory__memory_size_schedule=_capacity(8)),
    "memory.memory_size_schedule.points[0] ": _config(training__n_steps=3, memory__memory_size_schedule=_capacity(2)),
    "map_cycle.entries": _config(),  # every entry's repeat set to 0 below
    "map_cycle.entries[0].map_path": _config(),  # an unknown track below
}
for _entry in CASES["map_cycle.entries"].map_cycle.entries:
    _entry.repeat = 0
CASES["map_cycle.entries[0].map_path"].map_cycle.entries[0].map_path = "no_such_track"
#: Refusals whose fix is no single value (a file to measure again, a track to name, a race to add).
NO_VALUE_FIX = {"map_cycle.entries", "map_cycle.entries[0].map_path"}


def test_every_validation_problems_method_is_walked():
    """A validation_problems method added anywhere must get its cases here (and so its suggestions checked)."""
    found = set()
    for folder in ("rulka", "environments", "agents", "memories", "exploration_policies", "filters", "presets"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for match in re.finditer(r"def validation_problems\(", text):
                owner = re.findall(r"^class (\w+)", text[:match.start()], re.MULTILINE)[-1]
                found.add((path.relative_to(ROOT).as_posix(), owner))
    assert found == WALKED


def test_the_unbroken_configuration_has_no_problem():
    """The cases below start from a configuration that passes, so each refusal is the case's own."""
    assert config_problems(TrackManiaExperimentConfig()) == []


@pytest.mark.parametrize("key", sorted(CASES))
def test_each_suggested_value_is_possible_and_ends_the_refusal(key):
    """The refusal is given; each value it suggests passes its field's rule and, applied alone, ends it."""
    config = CASES[key]
    messages = [m for m in config_problems(config) if m.startswith(key.strip() + ":")]
    assert len(messages) == 1, config_problems(config)
    suggestions = SUGGESTION.findall(messages[0])
    if key in NO_VALUE_FIX:
        assert suggestions == []
        return
    assert suggestions, messages[0]
    for name, value in suggestions:
        fixed = apply_dict(copy.deepcopy(config), parse_override(f"{name}={value}"))
        assert config_problems(fixed) == [], (messages[0], name, value)


WATCHDOG_CASES = [(1.0, "processes", 30.0), (45.0, "processes", 30.0), (30.0, "processes", 30.0),
                  (1.0, "ray", 600.0), (300.0, "ray", 600.0), (60.0, "ray", 600.0)]


@pytest.mark.parametrize("timeout_s, backend, deadline_s", WATCHDOG_CASES)
def test_each_watchdog_suggestion_is_possible_and_ends_the_refusal(timeout_s, backend, deadline_s):
    """A watchdog too short for the game's own timeout: its fixes are a longer watchdog and, only where
    the result is still > 0, a shorter in-race timeout (processes) or start deadline (Ray)."""
    start_s, step_s = (deadline_s, 30.0) if backend == "ray" else (600.0, deadline_s)
    with pytest.raises(ConfigError) as refusal:
        check_collector_timeout(timeout_s, start_s, 4, backend, step_s)
    message = str(refusal.value)
    suggestions = SUGGESTION.findall(message) + ENV_SUGGESTION.findall(message)
    assert "at most -" not in message and "at most 0 " not in message
    assert suggestions and len(suggestions) == message.count(" to at least ") + message.count(" to at most ")
    for name, value in suggestions:
        config = _config(environment__backend="tmi", environment__timeout_during_run_ms=int(step_s * 1000),
                         performance__collector_timeout_s=timeout_s, performance__collector_backend=backend)
        if name == "TMI_START_TIMEOUT_S":
            assert float(value) > 0  # the settings' rule (environments/trackmania/tmi/games/settings.py)
            start = float(value)
        else:
            config = apply_dict(config, parse_override(f"{name}={value}"))
            assert config_problems(config) == [], (message, name, value)
            start = start_s
        performance, environment = config.performance, config.environment
        check_collector_timeout(performance.collector_timeout_s, start, 4, backend,
                                environment.timeout_during_run_ms / 1000.0)
    if timeout_s <= 30.0 and backend == "processes":
        assert "timeout_during_run_ms to at most" not in message  # no possible in-race timeout is short enough
