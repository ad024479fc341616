"""Range checks of the TrackMania parameters and of the map cycle's tracks, at load time."""
from __future__ import annotations

import numpy as np
import pytest

from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig
from rulka.config import ConfigError, apply_overrides
from rulka.validation import config_problems
from tests.environments.trackmania.helpers import straight_line

pytestmark = pytest.mark.reliability

BAD = [
    ("environment.backend=simulator", "environment.backend: must be a TrackMania backend: 'sim' (the simulator) or "
                                      "'tmi' (the real game), got 'simulator'"),
    ("environment.W_downsized=20", "environment.W_downsized: must be an int >= 34 (the conv stack's smallest input), got 20"),
    ("environment.game_camera_number=4", "environment.game_camera_number: must be one of 1, 2, 3, got 4"),
    ("environment.distance_between_checkpoints=0", "environment.distance_between_checkpoints: must be a positive number"),
    ("environment.temporal_mini_race_duration_ms=-7000", "environment.temporal_mini_race_duration_ms: must be a positive int"),
    ("environment.float_inputs_std=[1.0, 0.0]", "environment.float_inputs_std[1]: must be a positive number, got 0.0"),
    ("training.oversample_long_term_steps=-1", "training.oversample_long_term_steps: must be an int >= 0, got -1"),
    ("neural_network.float_hidden_dim=0", "neural_network.float_hidden_dim: must be a positive int, got 0"),
    ("map_cycle.entries=[{short_name: a, map_path: short, repeat: -1}]",
     "map_cycle.entries[0].repeat: must be an int >= 0, got -1"),
]


@pytest.mark.parametrize("override, message", BAD, ids=[o.split("=")[0] for o, _ in BAD])
def test_out_of_range_trackmania_value_is_refused(override, message):
    """Out-of-range TrackMania values are refused with their key path before any work."""
    with pytest.raises(ConfigError) as caught:
        apply_overrides(TrackManiaExperimentConfig(), overrides=[override])
    assert message in str(caught.value)


def test_fields_checked_together():
    """min > max shaping distance, a mini-race shorter than one action, normalisation of the wrong length."""
    assert config_problems(TrackManiaExperimentConfig()) == []
    config = TrackManiaExperimentConfig()
    config.environment.shaped_reward_min_dist_to_cur_vcp = 30.0
    config.environment.temporal_mini_race_duration_ms = 20
    config.environment.float_inputs_mean = [0.0] * 3
    problems = config_problems(config)
    assert any(p.startswith("environment.shaped_reward_min_dist_to_cur_vcp: must be <= shaped_reward_max_dist_to_cur_vcp "
                            "(25.0), got 30.0") for p in problems)
    assert any(p.startswith("environment.temporal_mini_race_duration_ms: must be at least one action (50 ms), got 20")
               for p in problems)
    assert any(p.startswith("environment.float_inputs_mean: must hold float_input_dim = 184 values") for p in problems)


def test_missed_gate_reward_must_not_beat_a_whole_mini_race_of_time_penalty():
    """With missed_gate_ends_race on, a longer mini-race makes the default -8.4 pay better than driving
    on (-0.0012 x 10 s = -12): refused, naming the bound; accepted at the bound and when the rule is off."""
    on = ["environment.missed_gate_ends_race=true"]
    assert config_problems(apply_overrides(TrackManiaExperimentConfig(), overrides=on)) == []
    longer = on + ["environment.temporal_mini_race_duration_ms=10000"]
    with pytest.raises(ConfigError) as caught:
        apply_overrides(TrackManiaExperimentConfig(), overrides=longer)
    assert ("environment.reward_on_missed_gate: must be <= constant_reward_per_ms x temporal_mini_race_duration_ms "
            "= -12 while missed_gate_ends_race is on") in str(caught.value)
    assert "set it to -12 or lower" in str(caught.value)
    apply_overrides(TrackManiaExperimentConfig(), overrides=longer + ["environment.reward_on_missed_gate=-12"])
    apply_overrides(TrackManiaExperimentConfig(), overrides=["environment.temporal_mini_race_duration_ms=10000"])


def test_sim_map_cycle_tracks_are_checked(tmp_path):
    """For the simulator, an unknown track name or a bad reference line in the map cycle is refused at load time."""
    bad = tmp_path / "bad.npy"
    line = straight_line(100.0)
    line[10, 2] = np.nan
    np.save(bad, line)
    good = tmp_path / "good.npy"
    np.save(good, straight_line(100.0))
    with pytest.raises(ConfigError, match=r"map_cycle.entries\[0\].map_path: unknown track 'shrot'"):
        apply_overrides(TrackManiaExperimentConfig(), overrides=["map_cycle.entries=[{map_path: shrot}]"])
    with pytest.raises(ConfigError, match=rf"map_cycle.entries\[1\].map_path: {bad}: reference line 1 point"):
        apply_overrides(TrackManiaExperimentConfig(), overrides=[f"map_cycle.entries=[{{map_path: {good}}}, {{map_path: {bad}}}]"])
    with pytest.raises(ConfigError, match=r"map_cycle.entries\[0\].reference_line_path: .*not found"):
        apply_overrides(TrackManiaExperimentConfig(), overrides=[f"map_cycle.entries=[{{reference_line_path: {tmp_path}/no.npy}}]"])
    with pytest.raises(ConfigError, match=r"map_cycle.entries: must hold at least one entry with repeat >= 1"):
        apply_overrides(TrackManiaExperimentConfig(), overrides=["map_cycle.entries=[]"])
    apply_overrides(TrackManiaExperimentConfig(), overrides=[f"map_cycle.entries=[{{map_path: {good}}}, {{map_path: procedural:3}}]"])


def test_real_game_line_is_checked_when_present_and_left_to_preflight_when_missing(tmp_path):
    """backend tmi: an existing reference line is validated now; a missing one is left to the graph
    manager's preflight, which explains how to run without the game."""
    bad = tmp_path / "bad.npy"
    np.save(bad, straight_line(100.0)[:, :2])
    base = ["environment.backend=tmi"]
    with pytest.raises(ConfigError, match=r"reference_line_path: .*shape \(201, 2\)"):
        apply_overrides(TrackManiaExperimentConfig(), overrides=base + [
            f"map_cycle.entries=[{{map_path: A.Challenge.Gbx, reference_line_path: {bad}}}]"])
    apply_overrides(TrackManiaExperimentConfig(), overrides=base + [
        f"map_cycle.entries=[{{map_path: A.Challenge.Gbx, reference_line_path: {tmp_path}/missing.npy}}]"])


def test_map_cycle_entry_of_the_wrong_type_is_named_not_crashed_on():
    """A preset's entry with a number for a path or a string for repeat gets its field's message; the
    track look-up that needs a valid entry is skipped instead of raising a TypeError."""
    config = TrackManiaExperimentConfig()
    config.map_cycle.entries[0].map_path = 3
    config.map_cycle.entries[1].repeat = "1"
    assert config_problems(config) == ["map_cycle.entries[0].map_path: must be a string, got 3",
                                       "map_cycle.entries[1].repeat: must be an int >= 0, got '1'"]
