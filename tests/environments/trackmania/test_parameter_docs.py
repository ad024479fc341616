"""The TrackMania parameters' documentation (environments/trackmania/parameters.py and
experiment_parameters.py) as `rulka params trackmania_iqn_uni` shows it: every parameter of the
configuration guide is listed, and float_input_dim is computed from the float layout."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

import environments.trackmania.training.experiment_parameters as experiment_parameters
import environments.trackmania.parameters as trackmania_parameters
from environments.trackmania.layout import FloatLayout
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from rulka.cli import main
from rulka.params_doc import undocumented

ROOT = Path(__file__).resolve().parents[3]
UNI_YAML = ROOT / "presets" / "trackmania_iqn_uni.yaml"

#: Every parameter the configuration guide documents (its ``py:data`` entries), in its order.
GUIDE_KEYS = """
tm_engine_step_per_action ms_per_tm_engine_step ms_per_action n_zone_centers_in_inputs
one_every_n_zone_centers_in_inputs distance_between_checkpoints n_zone_centers_extrapolate_before_start_of_map
n_zone_centers_extrapolate_after_end_of_map road_width temporal_mini_race_duration_ms
temporal_mini_race_duration_actions margin_to_announce_finish_meters n_contact_material_physics_behavior_types
n_prev_actions_in_inputs cutoff_rollout_if_race_not_finished_within_duration_ms
cutoff_rollout_if_no_vcp_passed_within_duration_ms timeout_during_run_ms game_reboot_interval game_camera_number
sync_virtual_and_real_checkpoints W_downsized H_downsized float_input_dim float_hidden_dim dense_hidden_dimension
iqn_embedding_dimension iqn_n iqn_k iqn_kappa use_ddqn clip_grad_value clip_grad_norm
number_memories_trained_on_between_target_network_updates soft_update_tau run_name global_schedule_speed
adam_epsilon adam_beta1 adam_beta2 batch_size lr_schedule gamma_schedule n_steps
discard_non_greedy_actions_in_nsteps oversample_long_term_steps oversample_maximum_term_steps
min_horizon_to_update_priority_actions tensorboard_suffix_schedule memory_size_schedule prio_alpha prio_epsilon
prio_beta number_times_single_memory_is_used_before_discard epsilon_schedule epsilon_boltzmann_schedule
tau_epsilon_boltzmann constant_reward_per_ms reward_per_m_advanced_along_centerline map_cycle
gpu_collectors_count running_speed send_shared_network_every_n_batches update_inference_network_every_n_actions
make_highest_prio_figures float_inputs_mean float_inputs_std
""".split()


@pytest.fixture(scope="module")
def uni_listing() -> str:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["params", "trackmania_iqn_uni"]) == 0
    return buffer.getvalue()


def _listed_keys(listing: str) -> set[str]:
    """Keys of the listing (``section.key = value`` lines) and the guide's YAML keys it names."""
    keys = {line.split(" = ")[0] for line in listing.splitlines() if " = " in line and not line.startswith(" ")}
    keys |= {line.split("YAML key in the guide: ")[1] for line in listing.splitlines() if "YAML key in the guide: " in line}
    return keys


def _yaml_keys(data: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            keys += _yaml_keys(value, f"{path}.")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            keys += [path] + sorted({f"{path}[].{k}" for item in value for k in item})
        else:
            keys.append(path)
    return keys


def test_every_guide_parameter_is_listed(uni_listing):
    """Each parameter of the configuration guide appears in `rulka params trackmania_iqn_uni`, under
    its name (as the last part of a key)."""
    names = {key.split(".")[-1].split("[")[0] for key in _listed_keys(uni_listing)}
    names |= {key.split(".")[0] for key in _listed_keys(uni_listing)}  # sections such as map_cycle
    assert [k for k in GUIDE_KEYS if k not in names] == []


def test_every_key_of_the_uni_yaml_is_listed(uni_listing):
    """Each key of presets/trackmania_iqn_uni.yaml (every guide default, sections as the guide's)
    appears in the listing as a key or as the guide's YAML key of a routed parameter."""
    listed = _listed_keys(uni_listing)
    keys = _yaml_keys(yaml.safe_load(UNI_YAML.read_text()))
    assert len(keys) > 80
    assert [k for k in keys if k not in listed] == []


def test_float_input_dim_is_computed_from_the_layout(capsys):
    """The listing states float_input_dim as the layout's size with its breakdown, at the preset's
    settings and after an override that changes it (the guide's 191 vs 184 is settled by the code)."""
    for overrides, params in (([], TrackManiaEnvironmentParameters()),
                              (["-cp", "environment.n_prev_actions_in_inputs=3"],
                               TrackManiaEnvironmentParameters(n_prev_actions_in_inputs=3))):
        assert main(["params", "trackmania_iqn_uni", "float_input_dim", *overrides]) == 0
        out = " ".join(capsys.readouterr().out.split())
        layout = FloatLayout.from_parameters(params)
        parts = " + ".join(f"{sl.stop - sl.start} {name}" for name, sl in layout.groups())
        assert f"environment.float_input_dim = {layout.size} (derived" in out
        assert f"Computed at these settings: {parts} = {layout.size}" in out
        assert "191" in out and "184 in its breakdown" in out


def test_min_horizon_note_gives_the_value_in_effect(capsys):
    """min_horizon_to_update_priority_actions is None in the preset; the listing gives the value used."""
    assert main(["params", "trackmania_iqn_uni", "min_horizon", "-cp", "environment.temporal_mini_race_duration_ms=5000"]) == 0
    assert "In effect here: 60 actions (mini-race horizon 100 actions)." in capsys.readouterr().out


@pytest.mark.parametrize("module", [trackmania_parameters, experiment_parameters], ids=lambda m: m.__name__)
def test_every_trackmania_parameter_dataclass_is_documented(module):
    """Every field of every parameter dataclass of the module has a meaning, and a unit and typical
    range when numeric (sections are documented by their class)."""
    classes = [c for c in vars(module).values()
               if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == module.__name__]
    assert classes
    assert {c.__name__: undocumented(c) for c in classes} == {c.__name__: [] for c in classes}
