"""Typed parameters of the TrackMania environment (the ``environment`` and ``rewards`` YAML sections).

Field names and defaults follow the configuration guide. Only simple types are used so that the
YAML loader can fill the dataclass directly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


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
