"""Rewards (progress x 0.01 - time x 0.0012), shaping, and terminated vs truncated episode ends."""
from __future__ import annotations

import math

import numpy as np
import pytest

from environments.trackmania.tools.baseline import BaselineDriver
from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.parameters import TrackManiaEnvironmentParameters


def _drive(env: TrackManiaEnv, policy, max_steps: int = 5000):
    obs, info = env.reset(seed=3)
    start = info["progress_m"]
    rewards, terminated, truncated = [], False, False
    for _ in range(max_steps):
        obs, r, terminated, truncated, info = env.step(policy())
        rewards.append(r)
        if terminated or truncated:
            break
    return np.array(rewards), info, start, terminated, truncated


def test_reward_sum_equals_progress_times_001_minus_time_times_00012():
    """Over a whole race the rewards add up to 0.01 x metres advanced - 0.0012 x milliseconds."""
    env = TrackManiaEnv(track="short", backend_options={"render": False})
    driver = BaselineDriver(env.track)
    rewards, info, start, terminated, truncated = _drive(env, lambda: driver.act(env.state))
    expected = 0.01 * (info["progress_m"] - start) - 0.0012 * info["race_time_ms"]
    assert math.isclose(rewards.sum(), expected, rel_tol=1e-9, abs_tol=1e-9)
    assert rewards.max() > rewards[0] + 0.015  # faster driving earns more per action


def test_shaping_leaves_the_reward_unshaped_and_reports_the_potential():
    """With shaping on, the environment's reward stays progress x 0.01 - time x 0.0012 (the memory
    shapes at sampling time), and info["shaping_potential"] equals the potential the agent reads from
    the floats (TrackManiaExperimentConfig.shaping_potential): -0.1 x clip(distance, 2, 25)."""
    from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig

    params = TrackManiaEnvironmentParameters(shaped_reward_dist_to_cur_vcp=-0.1)
    potential = TrackManiaExperimentConfig(environment=params).shaping_potential
    env = TrackManiaEnv(params=params, track="short", backend_options={"render": False})
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=1)
    total, seen = 0.0, []
    for _ in range(100):
        obs, r, te, tr, info = env.step(int(rng.choice([0, 1, 2])))
        total += r
        from_floats = float(potential({"floats": obs["floats"][None]})[0])
        assert math.isclose(info["shaping_potential"], from_floats, rel_tol=1e-5, abs_tol=1e-6)
        seen.append(from_floats)
    base = 0.01 * info["progress_m"] - 0.0012 * info["race_time_ms"]
    assert math.isclose(total, base, abs_tol=1e-9)
    assert min(seen) >= -2.5 and max(seen) <= -0.2 and len(set(np.round(seen, 4))) > 5


@pytest.mark.parametrize("gate_counts", [False, True], ids=["gate_missed", "gate_counted"])
def test_race_held_at_a_checkpoint_names_it_instead_of_no_progress(monkeypatch, gate_counts):
    """A car that drives past a real checkpoint too far from it (outside the zone rule's radius) makes
    no progress beyond it; its race ends naming that checkpoint, not 'no_progress':
    'missed_checkpoint_1_of_2' when the game did not count the gate, 'far_from_checkpoint_1_of_2'
    when it did. (30-minute runs on 'short' ended hundreds of races as 'no_progress' at exactly
    checkpoint 2's progress.)"""
    import dataclasses

    from environments.trackmania.sim import backend as sim_backend

    if not gate_counts:
        real = sim_backend.sim_geometry
        monkeypatch.setattr(sim_backend, "sim_geometry",
                            lambda track: dataclasses.replace(real(track), gate_half_width=-1.0))
    env = TrackManiaEnv(params=TrackManiaEnvironmentParameters(missed_gate_ends_race=False), track="short",
                        backend_options={"render": False})  # named, and truncated as Linesight
    paired = np.isfinite(env.zones.checkpoint_radius)
    env.zones.checkpoint_radius[paired] = 1e-3  # the driver passes near the line, never within 1 mm of it
    driver = BaselineDriver(env.track)
    _, info, _, terminated, truncated = _drive(env, lambda: driver.act(env.state))
    first_checkpoint_m = env.track.checkpoint_s[0]
    assert truncated and not terminated and abs(info["progress_m"] - first_checkpoint_m) < 25.0
    expected = "far_from_checkpoint_1_of_2" if gate_counts else "missed_checkpoint_1_of_2"
    assert info["end_reason"] == expected


def test_race_past_the_line_end_off_the_gate_names_the_missed_gate(monkeypatch):
    """A race that reaches the end of the reference line without the game counting the finish ends
    naming the gate it missed (here every gate is made unreachable: checkpoint 1 of the 2 of
    'short'), not 'no_progress'; with every checkpoint passed it is 'missed_finish_gate'."""
    import dataclasses

    from environments.trackmania.rewards import EpisodeEnd, EpisodeEndRules
    from environments.trackmania.sim import backend as sim_backend

    real = sim_backend.sim_geometry
    monkeypatch.setattr(sim_backend, "sim_geometry", lambda track: dataclasses.replace(real(track), gate_half_width=-1.0))
    env = TrackManiaEnv(params=TrackManiaEnvironmentParameters(missed_gate_ends_race=False), track="short",
                        backend_options={"render": False})  # named, and truncated as Linesight
    driver = BaselineDriver(env.track)
    _, info, _, terminated, truncated = _drive(env, lambda: driver.act(env.state))
    assert truncated and not terminated and not info["finished"]
    assert info["progress_fraction"] > 0.99 and info["end_reason"] == "missed_checkpoint_1_of_2"
    cut = EpisodeEnd(False, True, "no_progress")
    assert EpisodeEndRules.explain_unfinished(cut, True, 1, 3).reason == "missed_checkpoint_2_of_3"
    assert EpisodeEndRules.explain_unfinished(cut, True, 3, 3).reason == "missed_finish_gate"
    assert EpisodeEndRules.explain_unfinished(cut, False, 1, 3).reason == "no_progress"
    assert EpisodeEndRules.explain_unfinished(cut, False, 1, 3, held_at_checkpoint=2).reason == "missed_checkpoint_2_of_3"
    assert EpisodeEndRules.explain_unfinished(cut, False, 2, 3, held_at_checkpoint=2).reason == "far_from_checkpoint_2_of_3"
    assert EpisodeEndRules.explain_unfinished(cut, True, 3, 3, held_at_checkpoint=1).reason == "missed_finish_gate"
    finished = EpisodeEnd(True, False, "finished")
    assert EpisodeEndRules.explain_unfinished(finished, True, 3, 3) is finished


def test_finish_line_terminates_and_is_not_truncated():
    """Crossing the finish ends the episode as terminated (a true end)."""
    env = TrackManiaEnv(track="short", backend_options={"render": False})
    driver = BaselineDriver(env.track)
    _, info, _, terminated, truncated = _drive(env, lambda: driver.act(env.state))
    assert terminated and not truncated and info["finished"] and info["end_reason"] == "finished"


def test_race_time_limit_truncates():
    """The race-time cut-off ends a running race as truncated, not terminated."""
    params = TrackManiaEnvironmentParameters(cutoff_rollout_if_race_not_finished_within_duration_ms=3000)
    env = TrackManiaEnv(params=params, track="short", backend_options={"render": False})
    _, info, _, terminated, truncated = _drive(env, lambda: 0)
    assert truncated and not terminated and info["end_reason"] == "race_time_limit"
    assert info["race_time_ms"] == 3000


def test_standing_still_is_truncated_by_the_no_progress_rule_after_2_s():
    """No new reference point for 2 s ends the episode as truncated."""
    env = TrackManiaEnv(track="short", backend_options={"render": False})
    _, info, _, terminated, truncated = _drive(env, lambda: 3)
    assert truncated and not terminated and info["end_reason"] == "no_progress"
    assert info["race_time_ms"] == 2000


def test_random_policy_is_cut_off_by_the_no_progress_rule():
    """A uniformly random policy ends by the 2 s no-progress cut-off, long before the race-time limit."""
    env = TrackManiaEnv(track="short", backend_options={"render": False})
    rng = np.random.default_rng(0)
    for seed in range(3):
        env.reset(seed=seed)
        for _ in range(20000):
            _, _, terminated, truncated, info = env.step(int(rng.integers(12)))
            if terminated or truncated:
                break
        assert truncated and not terminated and info["end_reason"] == "no_progress"
        assert info["race_time_ms"] < 120_000


def test_missed_gate_ends_race_makes_the_cut_off_a_loss_with_its_reward(monkeypatch):
    """With ``missed_gate_ends_race`` a race cut off at a missed gate (or held far from a checkpoint) is
    lost: the same race (every
    gate unreachable) ends at the same step with the same name, but terminated instead of truncated,
    and its last reward is lower by exactly ``reward_on_missed_gate``; the steps before are unchanged.
    Off (the default, as Linesight) it stays a truncation. Other cut-offs are never made terminal."""
    import dataclasses

    from environments.trackmania.rewards import EpisodeEnd, EpisodeEndRules
    from environments.trackmania.sim import backend as sim_backend

    real = sim_backend.sim_geometry
    monkeypatch.setattr(sim_backend, "sim_geometry", lambda track: dataclasses.replace(real(track), gate_half_width=-1.0))
    runs = {}
    for ends in (False, True):
        params = TrackManiaEnvironmentParameters(missed_gate_ends_race=ends, reward_on_missed_gate=-10.0)
        env = TrackManiaEnv(params=params, track="short", backend_options={"render": False})
        driver = BaselineDriver(env.track)
        runs[ends] = _drive(env, lambda: driver.act(env.state))
    (r_off, info_off, _, term_off, trunc_off), (r_on, info_on, _, term_on, trunc_on) = runs[False], runs[True]
    assert trunc_off and not term_off and term_on and not trunc_on and not info_on["finished"]
    assert info_on["end_reason"] == info_off["end_reason"] == "missed_checkpoint_1_of_2"
    assert len(r_on) == len(r_off) and np.array_equal(r_on[:-1], r_off[:-1])
    assert math.isclose(r_on[-1] - r_off[-1], -10.0, abs_tol=1e-9)
    rules = EpisodeEndRules(TrackManiaEnvironmentParameters(missed_gate_ends_race=True))
    cut = EpisodeEnd(False, True, "no_progress")
    at_finish = EpisodeEndRules.explain_unfinished(cut, True, 2, 2)
    assert rules.lose_at_missed_gate(at_finish) == (EpisodeEnd(True, False, "missed_finish_gate", True), -8.4)
    far = EpisodeEndRules.explain_unfinished(cut, False, 1, 2, held_at_checkpoint=1)
    assert far.reason == "far_from_checkpoint_1_of_2"
    assert rules.lose_at_missed_gate(far) == (EpisodeEnd(True, False, "far_from_checkpoint_1_of_2", True), -8.4)
    for end in (cut, EpisodeEnd(False, True, "race_time_limit"), EpisodeEnd(True, False, "finished")):
        assert rules.lose_at_missed_gate(end) == (end, 0.0)


def _race_straight_at(monkeypatch, lateral: float, checkpoint_s: list[float], walls_moved_out_m: float = 0.0,
                      params: TrackManiaEnvironmentParameters | None = None):
    """Full throttle along a straight 300 m road (barriers 14 m from the line) ``lateral`` m left of
    the line, through the environment; with ``walls_moved_out_m`` the simulator's walls stand that much
    further out than the track's barriers. Returns the last step's info, terminated, truncated."""
    import dataclasses

    from environments.trackmania.actions import ACTION_FORWARD_IDX
    from environments.trackmania.sim import backend as sim_backend
    from tests.environments.trackmania.helpers import straight_track

    if walls_moved_out_m:
        real = sim_backend.sim_geometry
        monkeypatch.setattr(sim_backend, "sim_geometry", lambda track: dataclasses.replace(
            real(track), wall_distance=real(track).wall_distance + walls_moved_out_m))
    track = straight_track(300.0)
    track.checkpoint_s = list(checkpoint_s)
    env = TrackManiaEnv(params=params, track=track, backend_options={"render": False})
    env.reset(seed=0)
    env.backend.car.reset(0, lateral, 0.0)
    for _ in range(2000):
        _, _, terminated, truncated, info = env.step(ACTION_FORWARD_IDX)
        if terminated or truncated:
            return info, terminated, truncated
    raise AssertionError("the race did not end")


def test_crossing_the_finish_2m_inside_the_barrier_finishes_the_race(monkeypatch):
    """A car that crosses the finish 12 m off the line (on the run-off, 2 m inside the barrier)
    finishes, as in the game, instead of ending at 'missed_finish_gate'."""
    info, terminated, truncated = _race_straight_at(monkeypatch, 12.0, [])
    assert terminated and not truncated and info["end_reason"] == "finished"


@pytest.mark.parametrize("checkpoint_s, reason", [([], "missed_finish_gate"), ([150.0], "missed_checkpoint_1_of_1")],
                         ids=["finish", "checkpoint"])
def test_passing_beside_a_gate_outside_the_barriers_is_still_a_missed_gate(monkeypatch, checkpoint_s, reason):
    """A car that passes beside a gate outside the barriers (16 m off the line, the walls moved out
    of its way) has not crossed it: its race is cut off naming the missed gate (truncated, as Linesight,
    with ``missed_gate_ends_race`` off by default)."""
    info, terminated, truncated = _race_straight_at(monkeypatch, 16.0, checkpoint_s, walls_moved_out_m=10.0)
    assert truncated and not terminated and not info["finished"] and info["end_reason"] == reason


def test_a_line_against_the_wall_through_a_checkpoint_counts_it_and_finishes(monkeypatch):
    """12.8 m off the line (against the wall, the agent's fastest line in tight corners) the car
    crosses the checkpoint's gate, which counts, and its progress goes through (the simulator's zone
    radius covers its gates), so the race finishes. With Linesight's 12 m radius the progress was held
    at the checkpoint: 'far_from_checkpoint_1_of_1', a quarter of the races of a 14-minute run."""
    info, terminated, truncated = _race_straight_at(monkeypatch, 12.8, [150.0])
    assert len(info["checkpoint_times_ms"]) == 1
    assert info["end_reason"] == "finished" and info["finished"]
    assert (terminated, truncated) == (True, False)
