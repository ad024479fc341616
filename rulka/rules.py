"""What a configuration value must be: :class:`Rule`, the common rules, and :func:`param`, which
declares a field's rule beside the field.

Every field of a parameter section names its rule where it is declared::

    batch_size: int = param(512, POSITIVE_INT)
    lr_schedule: Schedule = param(rule=schedule_of(POSITIVE), default_factory=lambda: Schedule(...))

The rule is kept in the field's metadata (``dataclasses.fields(section)[i].metadata["rule"]``), so it
belongs to that field of that section only: two sections may each have a field ``level`` with
different rules. A subclass that only changes a default (``gpu_collectors_count: int = 4``) keeps its
base's rule; one that declares the field with :func:`param` again replaces it. :func:`field_rule`
finds the rule of a field; :func:`rulka.validation.validate_config` checks a configuration with it,
and ``rulka params`` and ``docs/configuration.md`` show its ``requirement`` as the *valid* range.

Checks that involve several fields are methods: a section's (or a whole configuration's)
``validation_problems(self) -> list[str]`` (see :mod:`rulka.validation`).

This module is a leaf (numpy and :mod:`rulka.schedules` only): parameter modules import it, and it
imports none of them.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from rulka.schedules import Schedule

#: The key of a field's metadata that holds its :class:`Rule`.
RULE_KEY = "rule"


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


# ---------------------------------------------------------------------------------------------
# Declaring a field with its rule, and finding it again
# ---------------------------------------------------------------------------------------------

def param(default: Any = dataclasses.MISSING, rule: Rule | None = None, *,
          default_factory: Callable[[], Any] | Any = dataclasses.MISSING) -> Any:
    """A dataclass field with its range rule: ``batch_size: int = param(512, POSITIVE_INT)``.

    ``default_factory`` replaces ``default`` for mutable defaults (lists, dicts, schedules), as in
    :func:`dataclasses.field`. The field's attribute docstring (the string under it) stays its
    documentation.
    """
    if not isinstance(rule, Rule):
        raise TypeError(f"param(...) needs the field's rule (a rulka.rules.Rule), got {rule!r}: "
                        f"e.g. param(512, POSITIVE_INT)")
    return dataclasses.field(default=default, default_factory=default_factory, metadata={RULE_KEY: rule})


def field_rule(owner: type, name: str) -> Rule | None:
    """The rule of field ``name`` of dataclass ``owner``: declared on the field, or, for a field a
    subclass redeclares without one (a new default), on the nearest base that declares it. None
    when no class declares a rule for it."""
    for klass in owner.__mro__:
        f = getattr(klass, "__dataclass_fields__", {}).get(name)
        if f is not None and isinstance(f.metadata.get(RULE_KEY), Rule):
            return f.metadata[RULE_KEY]
    return None


# ---------------------------------------------------------------------------------------------
# The common rules
# ---------------------------------------------------------------------------------------------

def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_int(value: Any) -> bool:
    """An int (numpy's too), not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_number(value: Any) -> bool:
    """A finite int or float (numpy's too), not a bool."""
    return (is_int(value) or isinstance(value, (float, np.floating))) and math.isfinite(float(value))


def int_at_least(low: int) -> Rule:
    """An int >= ``low`` ("a positive int" for 1)."""
    text = {1: "a positive int", 0: "an int >= 0"}.get(low, f"an int >= {low}")
    return Rule(text, lambda v: is_int(v) and v >= low)


POSITIVE_INT = int_at_least(1)
NON_NEGATIVE_INT = int_at_least(0)
POSITIVE_EVEN_INT = Rule("a positive even int", lambda v: is_int(v) and v > 0 and v % 2 == 0)
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
        if not is_number(v):
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


def is_capacity_pair(value: Any) -> bool:
    """A pair (capacity, start_learning_size) of positive ints with start <= capacity."""
    return (isinstance(value, (list, tuple)) and len(value) == 2 and all(is_int(v) and v > 0 for v in value)
            and value[1] <= value[0])


CAPACITY_PAIR = Rule("a pair (capacity, start_learning_size) of positive ints with start <= capacity", is_capacity_pair)
