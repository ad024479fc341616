"""rulka/params_doc.py: every parameter documents itself in a docstring next to its field (meaning,
unit, typical range, interactions), and walking a configuration finds it with its value and default."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import pytest

import rulka.parameters as core_parameters
from rulka.config import apply_dict
from rulka.params_doc import DocFormatError, FieldDoc, field_doc, parameter_rows, parse_doc, undocumented
from rulka.presets import available_presets, load_graph_manager
from rulka.schedules import Schedule


@pytest.fixture(scope="module")
def preset_configs() -> dict:
    return {name: load_graph_manager(name).config for name in available_presets()}


def test_docstring_splits_into_meaning_and_tags():
    """The meaning is the prose; Unit, Range, See and Section come from the one tag line."""
    doc = parse_doc("""Transitions per step, ``B``.
        Larger is smoother.

        Unit: transitions | Range: 32-512 | See: a.b, c.d | Section: rewards
        """)
    assert doc == FieldDoc("Transitions per step, `B`. Larger is smoother.", "transitions", "32-512",
                           ("a.b", "c.d"), "rewards")


def test_broken_tag_line_is_refused():
    """A tag line with an unknown tag or a repeated one names the field, so a typo cannot hide a unit."""
    with pytest.raises(DocFormatError, match="X.y: a tag line holds only"):
        parse_doc("Meaning.\n\nUnit: ms | Rnage: 1-2", "X.y")
    with pytest.raises(DocFormatError, match="given twice"):
        parse_doc("Meaning.\n\nUnit: ms | Unit: s", "X.y")


def test_missing_documentation_is_reported():
    """The check behind the coverage tests: an undocumented field, and a numeric one without unit or
    range, are each named with the file to edit; a documented bool needs no unit."""

    @dataclass
    class Section:
        documented: int = 1
        """Meaning.

        Unit: ms | Range: 1-2
        """
        flag: bool = True
        """A flag."""
        bare: int = 3
        no_unit: Optional[float] = None
        """Meaning without tags."""

    problems = undocumented(Section)
    assert len(problems) == 2
    assert problems[0].startswith("Section.bare: no documentation (write a docstring under the field in")
    assert problems[1].startswith("Section.no_unit: numeric parameter without Unit and Range")


def test_subclass_inherits_or_replaces_docs():
    """A subclass that only changes a default keeps its base's docs; one that documents the field again wins."""

    @dataclass
    class Base:
        a: int = 1
        """Base a."""
        b: int = 2
        """Base b."""

    @dataclass
    class Child(Base):
        a: int = 10
        b: int = 20
        """Child b."""

    assert field_doc(Child, "a").meaning == "Base a."
    assert field_doc(Child, "b").meaning == "Child b."


@pytest.mark.parametrize("name", [n for n in dir(core_parameters)
                                  if dataclasses.is_dataclass(getattr(core_parameters, n))
                                  and getattr(core_parameters, n).__module__ == core_parameters.__name__])
def test_every_core_parameter_dataclass_is_documented(name):
    """Every field of every dataclass of rulka/parameters.py has a meaning, and a unit and typical
    range when it is numeric (sections are documented by their class)."""
    assert undocumented(getattr(core_parameters, name)) == []


def test_every_parameter_of_every_builtin_preset_is_documented(preset_configs):
    """Walking each built-in preset's configuration (TrackMania's and new presets' dataclasses
    included) finds no parameter or derived value without documentation."""
    assert {name: undocumented(config) for name, config in preset_configs.items()} == {
        name: [] for name in preset_configs}


def test_see_references_name_existing_parameters(preset_configs):
    """Every key a docstring says a parameter interacts with exists in some built-in preset, so the
    cross-references cannot go stale when a field is renamed."""
    keys = {key for config in preset_configs.values() for row in parameter_rows(config)
            for key in (row.key, row.yaml_key) if key}
    dangling = {f"{row.key} -> {ref}" for config in preset_configs.values() for row in parameter_rows(config)
                if row.doc is not None for ref in row.doc.see if ref not in keys}
    assert dangling == set()


def test_guide_section_aliases_reach_their_field(preset_configs):
    """A row listed under the guide's section (e.g. rewards.constant_reward_per_ms) is really read
    into the field it names when written in YAML under that key."""
    checked = 0
    for config in preset_configs.values():
        for row in parameter_rows(config):
            if row.yaml_key and not row.derived and isinstance(row.value, (int, float)):
                new = (not row.value) if isinstance(row.value, bool) else row.value + 1
                section, key = row.yaml_key.split(".", 1)
                changed = apply_dict(config, {section: {key: new}})
                home, name = row.key.split(".", 1)
                assert getattr(getattr(changed, home), name) == new, row.yaml_key
                checked += 1
    assert checked >= 5  # rewards and frame sizes of the TrackMania presets


def test_rows_hold_values_defaults_types_and_derived_values(preset_configs):
    """Rows give the preset's value, the dataclass default and the type; properties are derived rows."""
    rows = {row.key: row for row in parameter_rows(preset_configs["cartpole_iqn"])}
    batch = rows["training.batch_size"]
    assert (batch.value, batch.default, batch.type_name, batch.doc.unit) == (64, 512, "int", "transitions")
    assert rows["training.lr_schedule"].type_name == "Schedule"
    assert rows["environment.max_episode_steps"].type_name == "int | None"
    tm_rows = {row.key: row for row in parameter_rows(preset_configs["trackmania_iqn_uni"])}
    assert tm_rows["environment.ms_per_action"].derived and tm_rows["environment.ms_per_action"].value == 50
    assert tm_rows["map_cycle.entries[].repeat"].value == [4, 1]
    assert tm_rows["environment.W_downsized"].yaml_key == "neural_network.W_downsized"


def test_schedule_values_are_printed_with_interpolation_and_counter():
    """Schedules print their knots and interpolation, and the counter when it is not env_steps."""
    from rulka.params_doc import format_value

    assert format_value(Schedule([(0, 1.0), (10, 0.5)], "linear", "episodes")) == "[[0, 1.0], [10, 0.5]] (linear, episodes)"
    assert format_value(Schedule([(0, (5, 2))], "staircase")) == "[[0, [5, 2]]] (staircase)"
