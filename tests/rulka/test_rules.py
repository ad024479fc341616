"""rulka/rules.py: each parameter's range rule is declared beside its field and belongs to that field of
that section only (no rule found by a bare field name), and every parameter of the project has one."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import typing
from dataclasses import dataclass
from typing import Optional

import pytest

from rulka.params_doc import parameter_rows
from rulka.parameters import (GymEnvironmentParameters, NeuralNetworkParameters, PerformanceParameters,
                              PresetValidationParameters)
from rulka.presets import available_presets
from rulka.rules import NON_EMPTY_STR, NON_NEGATIVE_INT, POSITIVE_INT, Rule, field_rule, param
from rulka.schedules import Schedule
from rulka.validation import config_problems

#: The modules that define configuration sections (presets may define their own too).
PARAMETER_MODULES = ["rulka.parameters", "environments.trackmania.parameters",
                     "environments.trackmania.training.experiment_parameters"]
#: Dataclasses of those modules that are not configuration sections: the golden test's own settings
#: (``preset_validation_params``) are never read from YAML or -cp, so no rule is checked on them.
NOT_SECTIONS = {PresetValidationParameters}


@dataclass
class _LevelSection:
    """A section of a preset of one's own whose ``level`` is a difficulty, not a gym environment id."""

    level: int = param(3, POSITIVE_INT)
    """Difficulty of the game.

    Unit: level | Range: 1-5
    """


@dataclass
class _LevelConfig:
    game: _LevelSection = dataclasses.field(default_factory=_LevelSection)


def _section_classes() -> list[type]:
    modules = [importlib.import_module(m) for m in PARAMETER_MODULES]
    modules += [importlib.import_module(f"presets.{name}") for name in available_presets()]
    return [klass for module in modules for _, klass in inspect.getmembers(module, inspect.isclass)
            if dataclasses.is_dataclass(klass) and klass.__module__ == module.__name__ and klass not in NOT_SECTIONS]


def _is_section_type(hint: object) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint) and hint is not Schedule


def test_every_field_of_every_parameter_section_has_a_rule():
    """Every field of every section class of the parameter modules and presets (whether or not a preset
    uses it) declares the values it accepts: a new parameter written without param(default, RULE)
    fails here, naming it."""
    missing = []
    classes = _section_classes()
    for klass in classes:
        hints = typing.get_type_hints(klass)
        for f in dataclasses.fields(klass):
            if f.init and not _is_section_type(hints[f.name]) and field_rule(klass, f.name) is None:
                missing.append(f"{klass.__module__}.{klass.__name__}.{f.name}")
    assert len(classes) >= 15
    assert missing == []


def test_a_rule_belongs_to_its_section_not_to_a_field_name():
    """A field named like another section's (``level``) gets its own rule, not the gym environment's;
    a field that declares none has none, whatever its name."""
    assert field_rule(GymEnvironmentParameters, "level") is NON_EMPTY_STR
    assert field_rule(_LevelSection, "level") is POSITIVE_INT
    assert config_problems(_LevelConfig()) == []
    assert config_problems(_LevelConfig(_LevelSection(0))) == ["game.level: must be a positive int, got 0"]

    @dataclass
    class Unruled:
        kwargs: dict = dataclasses.field(default_factory=dict)

    assert field_rule(Unruled, "kwargs") is None


def test_a_subclass_that_changes_a_default_keeps_the_rule_and_may_replace_it():
    """TrackMania's performance section only changes gpu_collectors_count's default: the core's rule
    still applies. A subclass that declares the field with param again replaces the rule."""
    from environments.trackmania.training.experiment_parameters import TrackManiaPerformanceParameters

    assert field_rule(TrackManiaPerformanceParameters, "gpu_collectors_count") is \
        field_rule(PerformanceParameters, "gpu_collectors_count") is NON_NEGATIVE_INT

    @dataclass
    class Wider(NeuralNetworkParameters):
        dense_hidden_dimension: int = param(1024, POSITIVE_INT)

    assert field_rule(Wider, "dense_hidden_dimension") is POSITIVE_INT
    assert field_rule(NeuralNetworkParameters, "dense_hidden_dimension") is NON_NEGATIVE_INT


def test_param_is_a_dataclass_field_with_its_rule():
    """param keeps the default (or the factory's fresh value) and stores the rule in the field's
    metadata; a rule is required."""
    rule = Rule("a small list", lambda v: len(v) < 3)

    @dataclass
    class Section:
        count: int = param(2, POSITIVE_INT)
        items: list = param(rule=rule, default_factory=lambda: [1])
        note: Optional[str] = param(None, NON_EMPTY_STR)

    first, second = Section(), Section()
    assert (first.count, first.items, first.note) == (2, [1], None) and first.items is not second.items
    assert dataclasses.fields(Section)[1].metadata["rule"] is rule
    with pytest.raises(TypeError, match=r"param\(512, POSITIVE_INT\)"):
        param(512)


def test_rulka_params_shows_the_rule_declared_beside_the_field():
    """The *valid* column of rulka params and docs/configuration.md is the field's own rule."""
    rows = {row.key: row for row in parameter_rows(_LevelConfig())}
    assert rows["game.level"].valid == "a positive int"
