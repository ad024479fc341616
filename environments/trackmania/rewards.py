"""Rewards and episode ends, shared by every backend."""
from __future__ import annotations

from dataclasses import dataclass

from environments.trackmania.parameters import TrackManiaEnvironmentParameters


class RewardFunction:
    """Per action: ``constant_reward_per_ms * ms_per_action + reward_per_m * progress_delta``.

    The reward is never shaped here. The shaping potential ``phi = w * clip(distance to the current
    reference point, min, max)`` (:meth:`potential`) is reported by the environment in
    ``info["shaping_potential"]``, and the replay memory adds ``discount * phi(s') - phi(s)`` when it
    assembles a batch (reading the same distance from the floats: see
    ``TrackManiaExperimentConfig.shaping_potential``), so that the shaping telescopes over a mini-race.
    """

    def __init__(self, params: TrackManiaEnvironmentParameters) -> None:
        self.time_reward = params.constant_reward_per_ms * params.ms_per_action
        self.per_m = params.reward_per_m_advanced_along_centerline
        self.shaping_weight = params.shaped_reward_dist_to_cur_vcp
        self.d_min = params.shaped_reward_min_dist_to_cur_vcp
        self.d_max = params.shaped_reward_max_dist_to_cur_vcp

    def potential(self, distance_to_current_point_m: float) -> float:
        """The shaping potential for this distance (0 when shaping is off)."""
        if not self.shaping_weight:
            return 0.0
        return self.shaping_weight * min(max(distance_to_current_point_m, self.d_min), self.d_max)

    def reset(self, distance_to_current_point_m: float) -> None:
        """Start a race: nothing to remember, the reward has no shaping term (kept for the env's reset)."""

    def __call__(self, progress_delta_m: float) -> float:
        """The reward of one action that advanced ``progress_delta_m`` along the line."""
        return self.time_reward + self.per_m * progress_delta_m


@dataclass
class EpisodeEnd:
    """Why an episode ended: ``terminated`` (finish line) or ``truncated`` (a cut-off), with the reason."""

    terminated: bool
    truncated: bool
    reason: str
    #: The race was cut off held at a gate its progress can never pass: the car went round a gate (a
    #: checkpoint's or the finish's), or past a checkpoint too far from it for the zone rule.
    missed_gate: bool = False


class EpisodeEndRules:
    """Finish line -> terminated; race time limit or no new reference point for a while -> truncated
    (a race cut off at a missed gate -> terminated, with ``missed_gate_ends_race``)."""

    def __init__(self, params: TrackManiaEnvironmentParameters) -> None:
        self.max_race_ms = params.cutoff_rollout_if_race_not_finished_within_duration_ms
        self.max_no_progress_ms = params.cutoff_rollout_if_no_vcp_passed_within_duration_ms
        self.missed_gate_reward = params.reward_on_missed_gate if params.missed_gate_ends_race else None

    def __call__(self, finished: bool, race_time_ms: int, last_new_zone_time_ms: int) -> EpisodeEnd:
        """Decide after one action."""
        if finished:
            return EpisodeEnd(True, False, "finished")
        if race_time_ms >= self.max_race_ms:
            return EpisodeEnd(False, True, "race_time_limit")
        if race_time_ms - last_new_zone_time_ms >= self.max_no_progress_ms:
            return EpisodeEnd(False, True, "no_progress")
        return EpisodeEnd(False, False, "")

    @staticmethod
    def explain_unfinished(end: EpisodeEnd, reached_line_end: bool, checkpoints_passed: int,
                           n_checkpoints: int, held_at_checkpoint: int | None = None) -> EpisodeEnd:
        """Name the missed gate of a race cut off at a checkpoint or after reaching the end of the line.

        ``held_at_checkpoint`` is the checkpoint K (1-based) whose zone the car went past too far
        from it (:meth:`ZoneTracker.held_at_checkpoint`): ``missed_checkpoint_K_of_N`` when the game
        has not counted K (the car went round its gate), else ``far_from_checkpoint_K_of_N`` (the game
        counted it, but the car crossed more than the zone rule's radius from it, so its progress
        stopped there). After the end of the line: ``missed_checkpoint_K_of_N`` when checkpoint K
        was never crossed within its gate, else ``missed_finish_gate`` (the car crossed the finish
        line off the gate, or the game has not counted it). Other ends are returned unchanged.
        """
        if not end.truncated:
            return end
        if held_at_checkpoint is not None and not reached_line_end:
            if checkpoints_passed >= held_at_checkpoint:
                return EpisodeEnd(False, True, f"far_from_checkpoint_{held_at_checkpoint}_of_{n_checkpoints}", True)
            return EpisodeEnd(False, True, f"missed_checkpoint_{held_at_checkpoint}_of_{n_checkpoints}", True)
        if not reached_line_end:
            return end
        if checkpoints_passed < n_checkpoints:
            return EpisodeEnd(False, True, f"missed_checkpoint_{checkpoints_passed + 1}_of_{n_checkpoints}", True)
        return EpisodeEnd(False, True, "missed_finish_gate", True)

    def lose_at_missed_gate(self, end: EpisodeEnd) -> tuple[EpisodeEnd, float]:
        """With ``missed_gate_ends_race``, a race cut off at a missed gate or held far from a checkpoint
        (``end.missed_gate``, set by :meth:`explain_unfinished`: ``missed_checkpoint_K_of_N``,
        ``missed_finish_gate``, ``far_from_checkpoint_K_of_N``) is lost: terminated, with
        ``reward_on_missed_gate`` added to its last step's reward (returned). Any other end is
        returned unchanged, with 0. (The simulator's gates span the road up to the walls, so there a
        fast line against the outer wall passes the gate but ends held far from the checkpoint.)"""
        if self.missed_gate_reward is None or not end.missed_gate:
            return end, 0.0
        return EpisodeEnd(True, False, end.reason, True), self.missed_gate_reward
