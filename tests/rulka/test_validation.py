"""Range checks of the configuration at load time, and the finite-data check of environment steps."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from rulka.cli import main
from rulka.config import ConfigError, apply_overrides
from rulka.parameters import ExperimentConfig, TrainingParameters
from rulka.presets import available_presets, load_graph_manager
from rulka.schedules import Schedule
from rulka.validation import (NonFiniteDataError, check_finite_step, config_problems, unchecked_fields,
                              validate_config)

pytestmark = pytest.mark.reliability

BAD_OVERRIDES = [
    ("training.batch_size=-5", "training.batch_size: must be a positive int, got -5"),
    ("training.batch_size=0", "training.batch_size: must be a positive int, got 0"),
    ("neural_network.iqn_n=7", "neural_network.iqn_n: must be a positive even int, got 7"),
    ("neural_network.iqn_k=0", "neural_network.iqn_k: must be a positive even int, got 0"),
    ("neural_network.soft_update_tau=0", "neural_network.soft_update_tau: must be a number in (0, 1], got 0.0"),
    ("neural_network.iqn_kappa=-1", "neural_network.iqn_kappa: must be a positive number, got -1.0"),
    ("neural_network.vector_embedder_hidden_sizes=[64, -1]",
     "neural_network.vector_embedder_hidden_sizes[1]: must be a positive int, got -1"),
    ("training.adam_beta1=1.0", "training.adam_beta1: must be a number in [0, 1), got 1.0"),
    ("training.n_steps=0", "training.n_steps: must be a positive int, got 0"),
    ("training.lr_schedule={points: [[0, 0.001], [10, -0.001]], interpolation: linear}",
     "training.lr_schedule.points[1]: must be a positive number, got -0.001"),
    ("training.gamma_schedule=[[0, 0.99], [100, 1.5]]",
     "training.gamma_schedule.points[1]: must be a number in [0, 1], got 1.5"),
    ("training.evaluate_every_n_env_steps=-1", "training.evaluate_every_n_env_steps: must be an int >= 0, got -1"),
    ("training.global_schedule_speed=.nan", "training.global_schedule_speed: must be a positive number, got nan"),
    ("memory.prio_beta=2", "memory.prio_beta: must be a number in [0, 1], got 2.0"),
    ("memory.buffer_test_ratio=1", "memory.buffer_test_ratio: must be a number in [0, 1), got 1.0"),
    ("memory.memory_size_schedule=[[0, [1000, 2000]]]",
     "memory.memory_size_schedule.points[0]: must be a pair (capacity, start_learning_size) of positive ints "
     "with start <= capacity, got (1000, 2000)"),
    ("exploration.epsilon_schedule=[[0, 1.5]]", "exploration.epsilon_schedule.points[0]: must be a number in [0, 1], got 1.5"),
    ("exploration.evaluation_epsilon=-0.1", "exploration.evaluation_epsilon: must be a number in [0, 1], got -0.1"),
    ("rewards.reward_clip=0", "rewards.reward_clip: must be None or a positive number, got 0.0"),
    ("performance.torch_num_threads=-2", "performance.torch_num_threads: must be an int >= 0, got -2"),
    ("environment.max_episode_steps=0", "environment.max_episode_steps: must be None or a positive int, got 0"),
    ("environment.level=''", "environment.level: must be a non-empty string, got ''"),
]


@pytest.mark.parametrize("override, message", BAD_OVERRIDES, ids=[o for o, _ in BAD_OVERRIDES])
def test_out_of_range_override_is_refused_with_the_key_path(override, message):
    """A -cp override out of range is refused at load time with the key's path, the rule and the value."""
    with pytest.raises(ConfigError) as caught:
        apply_overrides(ExperimentConfig(), overrides=[override])
    assert message in str(caught.value)


def test_yaml_file_out_of_range_is_refused(tmp_path):
    """Values from a --config YAML file are checked like -cp overrides; every problem is listed."""
    path = tmp_path / "bad.yaml"
    path.write_text("training:\n  batch_size: -5\nneural_network:\n  iqn_n: 7\n")
    with pytest.raises(ConfigError, match=r"\(2 problems\)") as caught:
        apply_overrides(ExperimentConfig(), [str(path)])
    assert "training.batch_size: must be a positive int, got -5" in str(caught.value)
    assert "neural_network.iqn_n: must be a positive even int, got 7" in str(caught.value)


def test_preset_built_in_python_is_validated():
    """A preset's own out-of-range values (no YAML, no override) are refused by the same pass."""
    config = ExperimentConfig(training=TrainingParameters(batch_size=-5, gamma_schedule=Schedule([(0, 2.0)])))
    problems = config_problems(config)
    assert problems == ["training.batch_size: must be a positive int, got -5",
                        "training.gamma_schedule.points[0]: must be a number in [0, 1], got 2.0"]
    with pytest.raises(ConfigError):
        apply_overrides(config)
    config.training.batch_size = 64.0  # a float where an int is meant
    assert "training.batch_size: must be a positive int, got 64.0" in config_problems(config)[0]


def test_capacity_must_exceed_the_n_step_window():
    """A replay capacity that cannot hold one n-step window is refused naming both keys."""
    with pytest.raises(ConfigError, match=r"memory.memory_size_schedule.points\[0\]: capacity 4 must exceed "
                                          r"training.n_steps \+ 1 = 4"):
        apply_overrides(ExperimentConfig(), overrides=["training.n_steps=3", "memory.memory_size_schedule=[[0, [4, 4]]]"])


@pytest.mark.parametrize("name", available_presets())
def test_every_preset_is_valid_and_every_field_has_a_rule(name):
    """Each built-in preset passes its range checks, and no parameter of it is left without a rule."""
    config = load_graph_manager(name).config
    assert config_problems(config) == []
    assert unchecked_fields(config) == []


def test_every_field_of_the_base_config_has_a_rule():
    """The base ExperimentConfig (and TrackMania's) has a rule for every field: a new parameter
    without a range check fails this test."""
    from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig

    assert unchecked_fields(ExperimentConfig()) == []
    assert unchecked_fields(TrackManiaExperimentConfig()) == []


def test_cli_refuses_a_bad_value_before_any_work(tmp_path, capsys):
    """rulka -p cartpole_iqn -cp training.batch_size=-5: one error line naming the key, exit 2, no run folder."""
    code = main(["-p", "cartpole_iqn", "-cp", "training.batch_size=-5", "--experiments-dir", str(tmp_path / "runs"),
                 "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert "training.batch_size: must be a positive int, got -5" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_validate_config_returns_a_valid_config_unchanged():
    """A valid configuration passes through validate_config untouched."""
    config = ExperimentConfig()
    assert validate_config(config) is config
    assert dataclasses.asdict(config) == dataclasses.asdict(ExperimentConfig())


BAD_STEPS = [
    ({"float": np.array([0.0, np.nan, 1.0], dtype=np.float32)}, 0.0, "observation 'float' holds 1 NaN/inf value(s) (first at index (1,))"),
    ({"float": np.array([[np.inf, 0.0]])}, 0.0, "observation 'float' holds 1 NaN/inf"),
    ({"frame": np.zeros((1, 4, 4), np.uint8), "float": np.zeros(3, np.float32)}, math.nan, "reward is nan"),
    ({"float": np.zeros(3, np.float32)}, -math.inf, "reward is -inf"),
    (np.array([1.0, np.nan]), 1.0, "observation 'observation' holds 1 NaN/inf"),
]


@pytest.mark.parametrize("observation, reward, message", BAD_STEPS, ids=["nan_float", "inf_2d", "nan_reward",
                                                                         "inf_reward", "bare_array"])
def test_non_finite_observation_or_reward_is_refused_with_env_and_step(observation, reward, message):
    """A NaN or infinite observation value or reward raises an error naming the environment, the step and the key."""
    with pytest.raises(NonFiniteDataError) as caught:
        check_finite_step(observation, reward, "TrackMania(short)", 1234)
    assert "environment TrackMania(short) at step 1234" in str(caught.value) and message in str(caught.value)


def test_finite_step_passes():
    """Finite floats, integer frames and a finite reward pass (numpy scalars too)."""
    check_finite_step({"frame": np.full((1, 4, 4), 255, np.uint8), "float": np.ones(5)}, np.float32(-0.5), "env", 0)


def test_register_field_rules_is_refused_with_how_to_port():
    """The removed rules-by-bare-name registry says what replaced it, instead of an ImportError or a
    rule silently applied to every section with a field of that name."""
    from rulka.validation import register_field_rules

    with pytest.raises(TypeError, match=r"declared beside its field.*param\(default, RULE\).*my_field"):
        register_field_rules({"my_field": None})


def test_a_section_still_setting_validation_rules_is_reported():
    """A preset's section class that still sets the old ``validation_rules`` mapping is refused with the
    port, rather than its rules being silently ignored."""
    @dataclasses.dataclass
    class OldSection:
        speed: int = 3
        validation_rules = {"speed": None}

    @dataclasses.dataclass
    class Config:
        game: OldSection = dataclasses.field(default_factory=OldSection)

    assert config_problems(Config()) == ["game: OldSection.validation_rules is no longer read; declare each rule "
                                         "beside its field as `name: type = param(default, RULE)` (from rulka.rules "
                                         "import param)"]


def test_register_config_check_still_adds_a_whole_config_check(monkeypatch):
    """A preset's whole-configuration check registered with register_config_check runs after the
    field rules and the config's own validation_problems, with the paths it gives."""
    from rulka import validation

    monkeypatch.setattr(validation, "_CONFIG_CHECKS", [])
    validation.register_config_check(lambda config: ["training.batch_size: too big for my GPU"]
                                     if config.training.batch_size > 256 else [])
    assert config_problems(ExperimentConfig()) == ["training.batch_size: too big for my GPU"]
    config = ExperimentConfig()
    config.training.batch_size = 0
    config.training.n_steps = 10
    config.memory.memory_size_schedule = Schedule([(0, (8, 8))], "staircase")
    assert config_problems(config) == [
        "training.batch_size: must be a positive int, got 0",
        "memory.memory_size_schedule.points[0]: capacity 8 must exceed training.n_steps + 1 = 11; raise the capacity "
        "to at least 12 (-cp memory.memory_size_schedule=[[0,[12,8]]]) or lower training.n_steps to at most 6 "
        "(-cp training.n_steps=6)"]


def test_a_rule_imported_from_its_old_module_says_where_it_went():
    """``from rulka.validation import POSITIVE_INT`` (a preset written before rules moved beside their
    fields) fails with the import to write instead of a bare 'cannot import name'."""
    with pytest.raises(ImportError, match=r"from rulka.rules import POSITIVE_INT"):
        from rulka.validation import POSITIVE_INT  # noqa: F401
    with pytest.raises(ImportError, match=r"from rulka.rules import field_rule"):
        from rulka.validation import rule_for  # noqa: F401
