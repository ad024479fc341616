"""Range checks of every configuration value, and of the data a run produces, before they do harm.

:func:`validate_config` walks every field of an experiment configuration (a preset's dataclasses,
after YAML files and ``-cp`` overrides are applied) and refuses values out of range with the key's
path: ``training.batch_size: must be a positive int, got -5``. The rule of a field is declared beside
the field (``batch_size: int = param(512, POSITIVE_INT)``, see :mod:`rulka.rules`). Checks that
involve several fields are a method ``validation_problems(self) -> list[str]`` of the section that
holds them (paths relative to the section; run when the section's own fields passed their rules) or
of the whole configuration (full paths; always run, so it must tolerate bad values elsewhere).
:func:`register_config_check` adds a whole-configuration check from outside the config class.

:func:`check_finite_step` refuses NaN or infinite observations and rewards of an environment step.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from rulka.rules import field_rule, is_number
from rulka.schedules import Schedule


class ConfigError(ValueError):
    """A configuration value or key that cannot be used; the message says where and why.

    Raised by the loader (:mod:`rulka.config`, which exports it too) and by :func:`validate_config`."""


_CONFIG_CHECKS: list[Callable[[Any], list[str]]] = []


def register_config_check(check: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
    """A check of the whole configuration (several fields together) from outside its class; returns
    messages with full key paths. A configuration class of your own can define
    ``validation_problems(self)`` instead."""
    if check not in _CONFIG_CHECKS:
        _CONFIG_CHECKS.append(check)
    return check


def register_field_rules(rules: Mapping[str, Any]) -> None:
    """Removed: rules by bare field name applied to every section that had a field of that name."""
    raise TypeError(
        "rulka.validation.register_field_rules was removed: a rule is now declared beside its field, for that "
        "section only. Write the field as `name: type = param(default, RULE)` (from rulka.rules import param, "
        f"POSITIVE_INT, ...); the rules given were for {', '.join(sorted(rules)) or 'no field'}")


#: Names this module held before rules moved beside their fields, and where they are now.
_MOVED = {**{name: name for name in ("Rule", "int_at_least", "POSITIVE_INT", "NON_NEGATIVE_INT", "POSITIVE_EVEN_INT",
                                     "BOOL", "NON_EMPTY_STR", "STR", "ANY", "number", "FINITE", "POSITIVE",
                                     "NON_NEGATIVE", "PROBABILITY", "choice", "optional", "list_of", "schedule_of",
                                     "CAPACITY_PAIR")},
          "rule_for": "field_rule"}


def __getattr__(name: str) -> Any:
    """A clear ImportError, with the new import, for a rule name that moved to :mod:`rulka.rules`."""
    if name in _MOVED:
        raise ImportError(f"rulka.validation.{name} moved to rulka.rules: from rulka.rules import {_MOVED[name]} "
                          f"(declare a field's rule beside it: `name: type = param(default, RULE)`)")
    raise AttributeError(f"module 'rulka.validation' has no attribute {name!r}")


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
        if field_rule(type(config), f.name) is None:
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
    """The problems of section ``obj`` in field order (its fields' rules, its nested sections and the
    sections in its lists), then its ``validation_problems()`` when its own fields passed."""
    problems: list[str] = _legacy_rules_problem(obj, path)
    own_failed = bool(problems)
    for f, value, key in _fields(obj, path):
        if _is_section(value):
            problems.extend(_walk(value, key))
            continue
        rule = field_rule(type(obj), f.name)
        if rule is not None:
            failed = rule.check(value, key)
            own_failed = own_failed or bool(failed)
            problems.extend(failed)
        if isinstance(value, list):
            for i, item in enumerate(value):
                if _is_section(item):
                    problems.extend(_walk(item, f"{key}[{i}]"))
    check_self = getattr(obj, "validation_problems", None)
    if callable(check_self) and not own_failed:
        prefix = f"{path}." if path else ""
        problems.extend(f"{prefix}{p}" for p in check_self())
    return problems


def _legacy_rules_problem(obj: Any, path: str) -> list[str]:
    """A section class that still sets ``validation_rules`` (read before rules lived on the fields)."""
    if getattr(type(obj), "validation_rules", None) is None:
        return []
    name = type(obj).__name__
    return [f"{path or name}: {name}.validation_rules is no longer read; declare each rule beside its field "
            f"as `name: type = param(default, RULE)` (from rulka.rules import param)"]


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
    if not is_number(reward):
        raise NonFiniteDataError(
            f"environment {env_name} at step {step}: reward is {reward!r}, not a finite number. Check the "
            f"environment's reward terms and the reward filters (reward_scale, reward_clip)")
