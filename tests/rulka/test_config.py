import pytest

from rulka.config import (ConfigError, FlatConfig, apply_dict, apply_overrides, config_to_dict, get_config,
                          load_yaml_file, parse_override, set_active_config)
from environments.trackmania.training.experiment_parameters import MapCycleEntry, TrackManiaExperimentConfig
from rulka.parameters import ExperimentConfig


@pytest.mark.reliability
def test_misspelled_section_is_refused_with_suggestion():
    """A YAML section typo (trainig) names the key and the closest valid section."""
    with pytest.raises(ConfigError, match=r"unknown key 'trainig' in the top level; did you mean 'training'"):
        apply_dict(ExperimentConfig(), {"trainig": {"batch_size": 32}})


@pytest.mark.reliability
def test_misspelled_key_is_refused_with_path_and_suggestion(tmp_path):
    """A key typo inside a section (batch_sise) names the section path and suggests batch_size."""
    path = tmp_path / "bad.yaml"
    path.write_text("training:\n  batch_sise: 32\n")
    with pytest.raises(ConfigError, match=r"unknown key 'batch_sise' in training; did you mean 'batch_size'"):
        apply_overrides(ExperimentConfig(), [str(path)])


@pytest.mark.reliability
def test_override_with_wrong_type_names_expected_type():
    """-cp training.batch_size=abc is refused with the expected type."""
    with pytest.raises(ConfigError, match=r"training.batch_size: expected int, got str 'abc'"):
        apply_overrides(ExperimentConfig(), overrides=["training.batch_size=abc"])


@pytest.mark.reliability
def test_invalid_schedule_in_yaml_names_the_key():
    """A schedule not starting at 0 is refused at load time with its key path."""
    with pytest.raises(ConfigError, match=r"training.lr_schedule: invalid schedule: .*start at step 0"):
        apply_dict(ExperimentConfig(), {"training": {"lr_schedule": [[5, 0.1]]}})


def test_yaml_values_load_into_typed_fields_and_keep_interpolation():
    """Lists become schedules that keep the field's interpolation; 1e-3 strings become floats; map cycle entries build."""
    config = apply_dict(TrackManiaExperimentConfig(), {
        "training": {"lr_schedule": [[0, "1e-3"], [100, "1e-4"]], "batch_size": 64},
        "map_cycle": {"entries": [{"short_name": "A01", "repeat": 4}]},
    })
    assert config.training.lr_schedule.interpolation == "exponential"
    assert config.training.lr_schedule.value(50) == pytest.approx(10 ** -3.5)
    assert config.training.batch_size == 64
    assert config.map_cycle.entries == [MapCycleEntry(short_name="A01", repeat=4)]


@pytest.mark.reliability
def test_bool_is_not_accepted_for_int_and_int_is_accepted_for_float():
    """Type checks are strict where YAML is ambiguous (true is not 1) and lenient where harmless."""
    with pytest.raises(ConfigError, match="expected int"):
        apply_overrides(ExperimentConfig(), overrides=["training.batch_size=true"])
    assert apply_overrides(ExperimentConfig(), overrides=["training.adam_epsilon=1"]).training.adam_epsilon == 1.0


def test_snapshot_round_trips():
    """config_snapshot.yaml content loads back into an equal configuration."""
    config = apply_overrides(ExperimentConfig(), overrides=["training.batch_size=7", "exploration.tau_epsilon_boltzmann=0.5"])
    reloaded = apply_dict(ExperimentConfig(), config_to_dict(config))
    assert config_to_dict(reloaded) == config_to_dict(config)


def test_parse_override_nests_keys():
    assert parse_override("memory.prio_alpha=0.6") == {"memory": {"prio_alpha": 0.6}}
    with pytest.raises(ConfigError, match="section.key=value"):
        parse_override("memory.prio_alpha")


def test_get_config_gives_flat_access():
    """get_config().batch_size finds training.batch_size, as code written against the YAML names expects."""
    set_active_config(apply_overrides(ExperimentConfig(), overrides=["training.batch_size=99"]))
    try:
        cfg = get_config()
        assert isinstance(cfg, FlatConfig)
        assert cfg.batch_size == 99
        assert cfg.training.batch_size == 99
        with pytest.raises(AttributeError, match="no configuration key"):
            cfg.no_such_key
    finally:
        set_active_config(None)


def test_state_normalization_yaml_from_rulka_stats_loads(tmp_path):
    """The YAML section written by `rulka stats` loads into the TrackMania parameters (routed to environment)."""
    from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig
    from environments.trackmania.training.normalization import write_state_normalization_yaml

    path = write_state_normalization_yaml(tmp_path / "n.yaml", [0.5] * 184, [2.0] * 184)
    config = apply_overrides(TrackManiaExperimentConfig(), [str(path)])
    assert config.environment.float_inputs_mean == [0.5] * 184 and config.environment.float_inputs_std == [2.0] * 184
    with pytest.raises(ConfigError, match=r"environment.float_inputs_mean\[1\]: expected float"):
        apply_dict(TrackManiaExperimentConfig(), {"state_normalization": {"float_inputs_mean": [0.0, "x"]}})


def test_a_yaml_file_names_files_beside_it_from_any_working_directory(tmp_path, monkeypatch):
    """A relative ``*_path`` value that names no file from the working directory but one beside the YAML
    file is read as that file; one found from the working directory, or nowhere, stays as written."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "line.npy").write_bytes(b"")
    (tmp_path / "here.npy").write_bytes(b"")
    yaml_file = tmp_path / "conf" / "run.yaml"
    yaml_file.write_text("map_cycle:\n  entries:\n    - {reference_line_path: line.npy, map_path: short}\n"
                         "    - {reference_line_path: here.npy, map_path: missing.npy}\n")
    monkeypatch.chdir(tmp_path)
    first, second = load_yaml_file(yaml_file)["map_cycle"]["entries"]
    assert first == {"reference_line_path": str(tmp_path.resolve() / "conf" / "line.npy"), "map_path": "short"}
    assert second == {"reference_line_path": "here.npy", "map_path": "missing.npy"}
