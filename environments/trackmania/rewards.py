"""Rewards and episode ends, shared by every backend."""
from __future__ import annotations

from dataclasses import dataclass

from environments.trackmania.parameters import TrackManiaEnvironmentParameters


class RewardFunction:
    """Per action: ``constant_reward_per_ms * ms_per_action + reward_per_m * progress_delta``, plus optional
    potential-based shaping ``phi(s') - phi(s)`` with ``phi = w * clip(distance to current point, min, max)``
    (gamma = 1 as in the mini-race setting)."""

    def __init__(self, params: TrackManiaEnvironmentParameters) -> None:
        self.time_reward = params.constant_reward_per_ms * params.ms_per_action
        self.per_m = params.reward_per_m_advanced_along_centerline
        self.shaping_weight = params.shaped_reward_dist_to_cur_vcp
        self.d_min = params.shaped_reward_min_dist_to_cur_vcp
        self.d_max = params.shaped_reward_max_dist_to_cur_vcp
        self._potential = 0.0

    def potential(self, distance_to_current_point_m: float) -> float:
        """The shaping potential for this distance (0 when shaping is off)."""
        if not self.shaping_weight:
            return 0.0
        return self.shaping_weight * min(max(distance_to_current_point_m, self.d_min), self.d_max)

    def reset(self, distance_to_current_point_m: float) -> None:
        """Start a race."""
        self._potential = self.potential(distance_to_current_point_m)

    def __call__(self, progress_delta_m: float, distance_to_current_point_m: float) -> float:
        """The reward of one action that advanced ``progress_delta_m`` along the line."""
        reward = self.time_reward + self.per_m * progress_delta_m
        if self.shaping_weight:
            new = self.potential(distance_to_current_point_m)
            reward += new - self._potential
            self._potential = new
        return reward


@dataclass
class EpisodeEnd:
    """Why an episode ended: ``terminated`` (finish line) or ``truncated`` (a cut-off), with the reason."""

    terminated: bool
    truncated: bool
    reason: str


class EpisodeEndRules:
    """Finish line -> terminated; race time limit or no new reference point for a while -> truncated."""

    def __init__(self, params: TrackManiaEnvironmentParameters) -> None:
        self.max_race_ms = params.cutoff_rollout_if_race_not_finished_within_duration_ms
        self.max_no_progress_ms = params.cutoff_rollout_if_no_vcp_passed_within_duration_ms

    def __call__(self, finished: bool, race_time_ms: int, last_new_zone_time_ms: int) -> EpisodeEnd:
        """Decide after one action."""
        if finished:
            return EpisodeEnd(True, False, "finished")
        if race_time_ms >= self.max_race_ms:
            return EpisodeEnd(False, True, "race_time_limit")
        if race_time_ms - last_new_zone_time_ms >= self.max_no_progress_ms:
            return EpisodeEnd(False, True, "no_progress")
        return EpisodeEnd(False, False, "")
