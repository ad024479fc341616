"""Range checks of every configuration value, and of the data a run produces, before they do harm.

:func:`validate_config` walks every field of an experiment configuration (a preset's dataclasses,
after YAML files and ``-cp`` overrides are applied) and refuses values out of range with the key's
path: ``training.batch_size: must be a positive int, got -5``. The rule of a field is found by its
name: first in the ``validation_rules`` mapping of its dataclass (or a base class), then in the
rules registered with :func:`register_field_rules` (the core ones below; an environment package
registers its own when imported). Checks that involve several fields are registered with
:func:`register_config_check`.

:func:`check_finite_step` refuses NaN or infinite observations and rewards of an environment step.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from rulka.config import ConfigError
from rulka.schedules import Schedule


# ---------------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    """A requirement on one value: ``test(value)`` is True when it holds; ``requirement`` completes
    "must be ..." in the error message. ``problems`` may give finer messages (schedules, lists)."""

    requirement: str
    test: Callable[[Any], bool]
    problems: Callable[[Any, str], list[str]] | None = None

    def check(self, value: Any, path: str) -> list[str]:
        if self.problems is not None:
            return self.problems(value, path)
        try:
            ok = bool(self.test(value))
        except Exception:  # a value of a type the test cannot handle fails the rule
            ok = False
        return [] if ok else [f"{path}: must be {self.requirement}, got {_show(value)}"]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, (float, np.floating))) and math.isfinite(float(value))


def int_at_least(low: int) -> Rule:
    """An int >= ``low`` ("a positive int" for 1)."""
    text = {1: "a positive int", 0: "an int >= 0"}.get(low, f"an int >= {low}")
    return Rule(text, lambda v: _is_int(v) and v >= low)


POSITIVE_INT = int_at_least(1)
NON_NEGATIVE_INT = int_at_least(0)
POSITIVE_EVEN_INT = Rule("a positive even int", lambda v: _is_int(v) and v > 0 and v % 2 == 0)
BOOL = Rule("true or false", lambda v: isinstance(v, (bool, np.bool_)))
NON_EMPTY_STR = Rule("a non-empty string", lambda v: isinstance(v, str) and v.strip() != "")
STR = Rule("a string", lambda v: isinstance(v, str))
ANY = Rule("anything", lambda v: True)


def number(low: float | None = None, high: float | None = None, low_open: bool = False,
           high_open: bool = False) -> Rule:
    """A finite number in the interval given (None: unbounded on that side)."""
    if low is not None and high is not None:
        text = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    elif low == 0 and low_open:
        text = "a positive number"
    elif low is not None:
        text = f"a number {'>' if low_open else '>='} {low:g}"
    elif high is not None:
        text = f"a number {'<' if high_open else '<='} {high:g}"
    else:
        text = "a finite number"

    def test(v: Any) -> bool:
        if not _is_number(v):
            return False
        v = float(v)
        if low is not None and (v <= low if low_open else v < low):
            return False
        return not (high is not None and (v >= high if high_open else v > high))

    return Rule(text, test)


FINITE = number()
POSITIVE = number(0, low_open=True)
NON_NEGATIVE = number(0)
PROBABILITY = number(0, 1)


def choice(*options: Any) -> Rule:
    return Rule("one of " + ", ".join(repr(o) for o in options), lambda v: v in options)


def optional(rule: Rule) -> Rule:
    """None, or a value that passes ``rule``."""
    def problems(value: Any, path: str) -> list[str]:
        if value is None:
            return []
        return [p.replace(f"must be {rule.requirement}", f"must be None or {rule.requirement}", 1)
                for p in rule.check(value, path)]

    return Rule(f"None or {rule.requirement}", lambda v: v is None or rule.test(v), problems)


def list_of(rule: Rule, min_length: int = 0) -> Rule:
    """A list (or tuple) of at least ``min_length`` items that each pass ``rule``."""
    def problems(value: Any, path: str) -> list[str]:
        if not isinstance(value, (list, tuple)):
            return [f"{path}: must be a list of {rule.requirement}, got {_show(value)}"]
        if len(value) < min_length:
            return [f"{path}: must hold at least {min_length} item(s), got {len(value)}"]
        return [p for i, item in enumerate(value) for p in rule.check(item, f"{path}[{i}]")]

    return Rule(f"a list of {rule.requirement}", lambda v: not problems(v, ""), problems)


def schedule_of(rule: Rule) -> Rule:
    """A :class:`Schedule` whose knots' values each pass ``rule`` (its steps are checked by Schedule)."""
    def problems(value: Any, path: str) -> list[str]:
        if not isinstance(value, Schedule):
            return [f"{path}: must be a schedule, got {_show(value)}"]
        return [p for i, (_, v) in enumerate(value.points) for p in rule.check(v, f"{path}.points[{i}]")]

    return Rule(f"a schedule of {rule.requirement}", lambda v: not problems(v, ""), problems)


def _capacity_pair(value: Any) -> bool:
    return (isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_int(v) and v > 0 for v in value)
            and value[1] <= value[0])


CAPACITY_PAIR = Rule("a pair (capacity, start_learning_size) of positive ints with start <= capacity", _capacity_pair)


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------

_FIELD_RULES: dict[str, Rule] = {}
_CONFIG_CHECKS: list[Callable[[Any], list[str]]] = []


def register_field_rules(rules: Mapping[str, Rule]) -> None:
    """Rules by field name, used for any section that has a field of that name."""
    _FIELD_RULES.update(rules)


def register_config_check(check: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
    """A check of the whole configuration (several fields together); returns messages with paths."""
    if check not in _CONFIG_CHECKS:
        _CONFIG_CHECKS.append(check)
    return check


def rule_for(owner: type, name: str) -> Rule | None:
    """The rule of field ``name`` of dataclass ``owner`` (its own ``validation_rules`` first)."""
    for klass in owner.__mro__:
        rules = klass.__dict__.get("validation_rules")
        if isinstance(rules, Mapping) and name in rules:
            return rules[name]
    return _FIELD_RULES.get(name)


register_field_rules({
    # neural_network
    "vector_embedder_hidden_sizes": list_of(POSITIVE_INT),
    "dense_hidden_dimension": NON_NEGATIVE_INT,
    "dueling": BOOL,
    "iqn_embedding_dimension": POSITIVE_INT,
    "iqn_n": POSITIVE_EVEN_INT,
    "iqn_k": POSITIVE_EVEN_INT,
    "iqn_kappa": POSITIVE,
    "use_ddqn": BOOL,
    "clip_grad_value": POSITIVE,
    "clip_grad_norm": POSITIVE,
    "number_memories_trained_on_between_target_network_updates": POSITIVE_INT,
    "soft_update_tau": number(0, 1, low_open=True),
    # training
    "run_name": NON_EMPTY_STR,
    "global_schedule_speed": POSITIVE,
    "adam_epsilon": POSITIVE,
    "adam_beta1": number(0, 1, high_open=True),
    "adam_beta2": number(0, 1, high_open=True),
    "weight_decay_lr_ratio": NON_NEGATIVE,
    "batch_size": POSITIVE_INT,
    "lr_schedule": schedule_of(POSITIVE),
    "gamma_schedule": schedule_of(PROBABILITY),
    "n_steps": POSITIVE_INT,
    "discard_non_greedy_actions_in_nsteps": BOOL,
    "tensorboard_suffix_schedule": schedule_of(STR),
    "train_every_n_env_steps": POSITIVE_INT,
    "evaluate_every_n_env_steps": NON_NEGATIVE_INT,
    "evaluation_episodes": POSITIVE_INT,
    "checkpoint_every_n_env_steps": NON_NEGATIVE_INT,
    "max_env_steps": POSITIVE_INT,
    # memory
    "memory_size_schedule": schedule_of(CAPACITY_PAIR),
    "number_times_single_memory_is_used_before_discard": POSITIVE,
    "prio_alpha": NON_NEGATIVE,
    "prio_epsilon": POSITIVE,
    "prio_beta": PROBABILITY,
    "buffer_test_ratio": number(0, 1, high_open=True),
    "save_memory_in_checkpoint": BOOL,
    # exploration
    "epsilon_schedule": schedule_of(PROBABILITY),
    "epsilon_boltzmann_schedule": schedule_of(PROBABILITY),
    "tau_epsilon_boltzmann": NON_NEGATIVE,
    "evaluation_epsilon": PROBABILITY,
    # rewards
    "reward_scale": FINITE,
    "reward_clip": optional(POSITIVE),
    # map_cycle entries (the environment package may register stricter path rules)
    "entries": Rule("a list of map-cycle entries", lambda v: isinstance(v, list)),
    "short_name": NON_EMPTY_STR,
    "map_path": STR,
    "reference_line_path": STR,
    "is_exploration": BOOL,
    "fill_buffer": BOOL,
    "repeat": NON_NEGATIVE_INT,
    # performance
    "gpu_collectors_count": NON_NEGATIVE_INT,
    "envs_per_collector": POSITIVE_INT,
    "collector_device": Rule("cpu, cuda, cuda:N or auto",
                             lambda v: isinstance(v, str) and (v in ("cpu", "cuda", "auto") or
                                                               (v.startswith("cuda:") and v[5:].isdigit()))),
    "collector_torch_threads": POSITIVE_INT,
    "max_rollout_queue_size": POSITIVE_INT,
    "rollout_chunk_actions": POSITIVE_INT,
    "collector_buffer_actions": POSITIVE_INT,
    "collector_timeout_s": POSITIVE,
    "collector_backend": choice("processes", "ray"),
    "ray_collector_cpus": NON_NEGATIVE,
    "ray_collector_gpus": NON_NEGATIVE,
    "ray_collector_resources": Rule("a mapping of resource names to amounts >= 0",
                                    lambda v: isinstance(v, dict) and all(isinstance(k, str) and _is_number(a) and a >= 0
                                                                        for k, a in v.items())),
    "running_speed": POSITIVE_INT,
    "send_shared_network_every_n_batches": POSITIVE_INT,
    "update_inference_network_every_n_actions": POSITIVE_INT,
    "make_highest_prio_figures": BOOL,
    "torch_num_threads": NON_NEGATIVE_INT,
    "precision": choice("auto", "float32", "bfloat16", "float16"),
    # gym environment
    "level": NON_EMPTY_STR,
    "kwargs": Rule("a mapping of keyword arguments", lambda v: isinstance(v, dict) and all(isinstance(k, str) for k in v)),
    "max_episode_steps": optional(POSITIVE_INT),
})


@register_config_check
def _memory_fits_n_steps(config: Any) -> list[str]:
    """Each replay capacity must exceed ``n_steps + 1`` (an n-step window plus the next state)."""
    memory, training = getattr(config, "memory", None), getattr(config, "training", None)
    schedule = getattr(memory, "memory_size_schedule", None)
    n_steps = getattr(training, "n_steps", None)
    if not isinstance(schedule, Schedule) or not _is_int(n_steps):
        return []
    return [f"memory.memory_size_schedule.points[{i}]: capacity {v[0]} must exceed training.n_steps + 1 = {n_steps + 1}"
            for i, (_, v) in enumerate(schedule.points) if _capacity_pair(v) and v[0] <= n_steps + 1]


# ---------------------------------------------------------------------------------------------
# Walking a configuration
# ---------------------------------------------------------------------------------------------

def config_problems(config: Any, path: str = "") -> list[str]:
    """Every problem of ``config`` (a dataclass instance), one message per problem, with key paths."""
    problems = _walk(config, path)
    if not path:
        for check in _CONFIG_CHECKS:
            problems.extend(check(config))
    return problems


def validate_config(config: Any) -> Any:
    """Raise :class:`ConfigError` listing every out-of-range value of ``config``; return ``config``.

    Call it before any work: after a preset is built and its YAML files and ``-cp`` overrides are
    applied, and when a run is resumed.
    """
    problems = config_problems(config)
    if problems:
        more = f" ({len(problems)} problems)" if len(problems) > 1 else ""
        raise ConfigError(f"invalid configuration{more}:\n  " + "\n  ".join(problems))
    return config


def unchecked_fields(config: Any, path: str = "") -> list[str]:
    """Key paths of fields that have no rule (a test keeps this empty for the built-in configs)."""
    missing = []
    for f, value, key in _fields(config, path):
        if _is_section(value):
            missing.extend(unchecked_fields(value, key))
            continue
        if rule_for(type(config), f.name) is None:
            missing.append(key)
        if isinstance(value, list):
            for i, item in enumerate(value):
                if _is_section(item):
                    missing.extend(unchecked_fields(item, f"{key}[{i}]"))
    return missing


def _is_section(value: Any) -> bool:
    """A dataclass instance whose fields are checked one by one (a Schedule is one value)."""
    return dataclasses.is_dataclass(value) and not isinstance(value, (type, Schedule))


def _fields(obj: Any, path: str) -> Iterable[tuple[dataclasses.Field, Any, str]]:
    for f in dataclasses.fields(obj):
        if f.init and not f.name.startswith("_"):
            yield f, getattr(obj, f.name), f"{path}.{f.name}" if path else f.name


def _walk(obj: Any, path: str) -> list[str]:
    problems: list[str] = []
    check_self = getattr(obj, "validation_problems", None)
    for f, value, key in _fields(obj, path):
        if _is_section(value):
            problems.extend(_walk(value, key))
            continue
        rule = rule_for(type(obj), f.name)
        if rule is not None:
            problems.extend(rule.check(value, key))
        if isinstance(value, list):
            for i, item in enumerate(value):
                if _is_section(item):
                    problems.extend(_walk(item, f"{key}[{i}]"))
    if callable(check_self) and not problems:
        prefix = f"{path}." if path else ""
        problems.extend(f"{prefix}{p}" for p in check_self())
    return problems


# ---------------------------------------------------------------------------------------------
# Data produced by a run
# ---------------------------------------------------------------------------------------------

class NonFiniteDataError(ValueError):
    """An environment produced a NaN or infinite observation or reward."""


def check_finite_step(observation: Mapping[str, Any] | np.ndarray, reward: float, env_name: str, step: int) -> None:
    """Raise :class:`NonFiniteDataError` if ``reward`` or any float array of ``observation`` holds NaN or inf.

    ``observation`` is a dict of arrays (or one array); integer arrays (frames) cannot hold NaN and
    are skipped. ``step`` is the environment step counter, for the message. Costs one
    ``np.isfinite(...).all()`` per float array (microseconds for TrackMania's 184 floats).
    """
    items = observation.items() if isinstance(observation, Mapping) else [("observation", observation)]
    for key, value in items:
        array = np.asarray(value)
        if array.dtype.kind in "fc" and not np.isfinite(array).all():
            bad = np.argwhere(~np.isfinite(array))
            where = ", ".join(str(tuple(int(i) for i in idx)) for idx in bad[:3])
            raise NonFiniteDataError(
                f"environment {env_name} at step {step}: observation '{key}' holds {len(bad)} NaN/inf value(s) "
                f"(first at index {where}). The environment or an observation filter produced them: check its "
                f"inputs (e.g. the reference line, the state normalisation's std of 0)")
    if not _is_number(reward):
        raise NonFiniteDataError(
            f"environment {env_name} at step {step}: reward is {reward!r}, not a finite number. Check the "
            f"environment's reward terms and the reward filters (reward_scale, reward_clip)")
