"""Typed parameters of the TrackMania environment (the ``environment`` and ``rewards`` YAML sections).

Field names and defaults follow the configuration guide. Only simple types are used so that the
YAML loader can fill the dataclass directly.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from rulka.validation import (BOOL, FINITE, NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, Rule, choice,
                              int_at_least, list_of, optional, register_config_check, register_field_rules)


@dataclass
class TrackManiaEnvironmentParameters:
    """Environment, frame, reward and cut-off settings shared by the ``sim`` and ``tmi`` backends."""

    backend: str = "sim"
    """What runs the car: "sim" (the built-in simulator) or "tmi" (the real game through TMInterface 2)."""

    # --- timing ---
    tm_engine_step_per_action: int = 5
    """Engine ticks (10 ms each) per agent action, ticks."""
    ms_per_tm_engine_step: int = 10
    """Duration of one engine tick, ms (fixed by the game: 100 Hz)."""

    # --- spatial ---
    n_zone_centers_in_inputs: int = 40
    """Reference-line points given to the agent, count."""
    one_every_n_zone_centers_in_inputs: int = 20
    """Stride between the reference-line points given to the agent, points."""
    distance_between_checkpoints: float = 0.5
    """Spacing of the reference line (virtual checkpoints), m."""
    n_zone_centers_extrapolate_before_start_of_map: int = 20
    """Extrapolated points prepended before the start, count."""
    n_zone_centers_extrapolate_after_end_of_map: int = 1000
    """Extrapolated points appended after the finish, count."""
    road_width: float = 90.0
    """Width used by zone tracking: max distance to the next point is sqrt(0.25^2 + (road_width/2)^2), m."""

    # --- mini-races ---
    temporal_mini_race_duration_ms: int = 7000
    """Horizon of one mini-race, ms."""
    margin_to_announce_finish_meters: float = 700.0
    """Cap of the distance-to-finish float, m."""

    # --- contact and physics inputs ---
    n_contact_material_physics_behavior_types: int = 4
    """Surface groups one-hot encoded per wheel, count."""
    n_prev_actions_in_inputs: int = 5
    """Previous actions in the float inputs, count."""

    # --- timeouts ---
    cutoff_rollout_if_race_not_finished_within_duration_ms: int = 300_000
    """Truncate the episode at this race time, ms."""
    cutoff_rollout_if_no_vcp_passed_within_duration_ms: int = 2_000
    """Truncate the episode when no new reference point was reached for this long, ms."""
    timeout_during_run_ms: int = 30_000
    """TMInterface answer timeout while racing, ms (tmi backend only)."""
    timeout_between_runs_ms: int = 600_000_000
    """TMInterface answer timeout between races, ms (tmi backend only)."""
    game_reboot_interval: int = 43_200
    """Restart the game after this long, s (tmi backend only)."""

    # --- game settings ---
    game_camera_number: int = 2
    """Camera: 1 behind the car, 2 first person, 3 top view."""
    sync_virtual_and_real_checkpoints: bool = True
    """Only advance onto a point paired with a real checkpoint when the car is within 12 m of it, flag."""

    # --- frame ---
    W_downsized: int = 160
    """Frame width, pixels."""
    H_downsized: int = 120
    """Frame height, pixels."""

    # --- rewards ---
    constant_reward_per_ms: float = -0.0012
    """Reward per millisecond of race time, reward/ms."""
    reward_per_m_advanced_along_centerline: float = 0.01
    """Reward per metre of progress along the reference line, reward/m."""
    shaped_reward_dist_to_cur_vcp: float = 0.0
    """Potential-shaping weight on the distance to the current reference point, reward/m (0 = off; -0.1 typical)."""
    shaped_reward_min_dist_to_cur_vcp: float = 2.0
    """Lower clip of that distance, m."""
    shaped_reward_max_dist_to_cur_vcp: float = 25.0
    """Upper clip of that distance, m."""

    # --- state normalisation (the ``state_normalization`` section; None = built-in defaults) ---
    float_inputs_mean: Optional[list[float]] = None
    """Per-float mean, same units as each float; length float_input_dim."""
    float_inputs_std: Optional[list[float]] = None
    """Per-float standard deviation, same units as each float; length float_input_dim."""

    @property
    def ms_per_action(self) -> int:
        """Duration of one action, ms."""
        return self.tm_engine_step_per_action * self.ms_per_tm_engine_step

    @property
    def temporal_mini_race_duration_actions(self) -> int:
        """Mini-race horizon, actions."""
        return self.temporal_mini_race_duration_ms // self.ms_per_action

    @property
    def float_input_dim(self) -> int:
        """Length of the float observation vector (184 at defaults)."""
        from environments.trackmania.layout import FloatLayout

        return FloatLayout.from_parameters(self).size


# ---------------------------------------------------------------------------------------------
# Range checks (run by rulka.validation.validate_config when a configuration is loaded)
# ---------------------------------------------------------------------------------------------

#: Smallest frame side Linesight's conv stack accepts (k4 s2, k4 s2, k3 s2, k3 s1), pixels.
MIN_FRAME_SIDE = 34

TrackManiaEnvironmentParameters.validation_rules = {
    "backend": Rule("a TrackMania backend: 'sim' (the simulator) or 'tmi' (the real game)",
                    lambda v: isinstance(v, str) and v in ("sim", "tmi")),
    "tm_engine_step_per_action": POSITIVE_INT,
    "ms_per_tm_engine_step": POSITIVE_INT,
    "n_zone_centers_in_inputs": int_at_least(2),
    "one_every_n_zone_centers_in_inputs": POSITIVE_INT,
    "distance_between_checkpoints": POSITIVE,
    "n_zone_centers_extrapolate_before_start_of_map": NON_NEGATIVE_INT,
    "n_zone_centers_extrapolate_after_end_of_map": NON_NEGATIVE_INT,
    "road_width": POSITIVE,
    "temporal_mini_race_duration_ms": POSITIVE_INT,
    "margin_to_announce_finish_meters": POSITIVE,
    "n_contact_material_physics_behavior_types": POSITIVE_INT,
    "n_prev_actions_in_inputs": NON_NEGATIVE_INT,
    "cutoff_rollout_if_race_not_finished_within_duration_ms": POSITIVE_INT,
    "cutoff_rollout_if_no_vcp_passed_within_duration_ms": POSITIVE_INT,
    "timeout_during_run_ms": POSITIVE_INT,
    "timeout_between_runs_ms": POSITIVE_INT,
    "game_reboot_interval": POSITIVE_INT,
    "game_camera_number": choice(1, 2, 3),
    "sync_virtual_and_real_checkpoints": BOOL,
    "W_downsized": Rule(f"an int >= {MIN_FRAME_SIDE} (the conv stack's smallest input)",
                        lambda v: int_at_least(MIN_FRAME_SIDE).test(v)),
    "H_downsized": Rule(f"an int >= {MIN_FRAME_SIDE} (the conv stack's smallest input)",
                        lambda v: int_at_least(MIN_FRAME_SIDE).test(v)),
    "constant_reward_per_ms": FINITE,
    "reward_per_m_advanced_along_centerline": FINITE,
    "shaped_reward_dist_to_cur_vcp": FINITE,
    "shaped_reward_min_dist_to_cur_vcp": NON_NEGATIVE,
    "shaped_reward_max_dist_to_cur_vcp": POSITIVE,
    "float_inputs_mean": optional(list_of(FINITE)),
    "float_inputs_std": optional(list_of(POSITIVE)),
}


def _environment_problems(self: TrackManiaEnvironmentParameters) -> list[str]:
    """Checks of several environment fields together (paths relative to the section)."""
    problems = []
    if self.shaped_reward_min_dist_to_cur_vcp > self.shaped_reward_max_dist_to_cur_vcp:
        problems.append(f"shaped_reward_min_dist_to_cur_vcp: must be <= shaped_reward_max_dist_to_cur_vcp "
                        f"({self.shaped_reward_max_dist_to_cur_vcp}), got {self.shaped_reward_min_dist_to_cur_vcp}")
    if self.temporal_mini_race_duration_ms < self.ms_per_action:
        problems.append(f"temporal_mini_race_duration_ms: must be at least one action ({self.ms_per_action} ms), "
                        f"got {self.temporal_mini_race_duration_ms}")
    for name in ("float_inputs_mean", "float_inputs_std"):
        values = getattr(self, name)
        if values is not None and len(values) != self.float_input_dim:
            problems.append(f"{name}: must hold float_input_dim = {self.float_input_dim} values (one per float "
                            f"input at these settings), got {len(values)}; measure them again with `rulka stats`")
    return problems


TrackManiaEnvironmentParameters.validation_problems = _environment_problems

register_field_rules({
    # training (TrackManiaTrainingParameters)
    "oversample_long_term_steps": NON_NEGATIVE_INT,
    "oversample_maximum_term_steps": NON_NEGATIVE_INT,
    "min_horizon_to_update_priority_actions": optional(NON_NEGATIVE_INT),
    "target_self_loss_clamp_ratio": NON_NEGATIVE,
    # neural_network (TrackManiaNeuralNetworkParameters)
    "float_hidden_dim": POSITIVE_INT,
})


@register_config_check
def _map_cycle_tracks(config: object) -> list[str]:
    """The map cycle of a TrackMania configuration: at least one race, and for the simulator every
    track name known and every reference line file valid (the real game's files are checked by the
    graph manager's preflight, which explains how to run without the game)."""
    environment, map_cycle = getattr(config, "environment", None), getattr(config, "map_cycle", None)
    entries = getattr(map_cycle, "entries", None)
    if not isinstance(environment, TrackManiaEnvironmentParameters) or not isinstance(entries, list):
        return []
    if not any(getattr(e, "repeat", 0) > 0 for e in entries):
        return ["map_cycle.entries: must hold at least one entry with repeat >= 1 (a map to race on)"]
    problems = []
    for i, entry in enumerate(entries):
        key = f"map_cycle.entries[{i}]"
        line_path = getattr(entry, "reference_line_path", "")
        if line_path and (environment.backend == "sim" or Path(line_path).is_file()):
            problems.extend(_track_problem(f"{key}.reference_line_path", line_path))
        elif environment.backend == "sim":
            problems.extend(_track_problem(f"{key}.map_path", getattr(entry, "map_path", "")))
    return problems


def _track_problem(key: str, name: str) -> list[str]:
    from environments.trackmania.track import TrackFileError
    from environments.trackmania.tracks import check_track_name

    try:
        check_track_name(name)
    except TrackFileError as error:
        return [f"{key}: {error}"]
    return []
