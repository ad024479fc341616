"""Whole rollouts through ``TrackManiaEnv(backend="tmi")`` against the fake game server.

The fake car drives along +z; the reference line (saved to tmp_path) runs straight along z past the
fake's finish at 25 m, so only the game's checkpoint count can end a race at the finish.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from environments.trackmania.actions import ACTION_FORWARD_IDX
from environments.trackmania.backend_registry import (RolloutDiscardedError, available_backends, backend_may_discard_races,
                                                      make_backend)
from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.tmi.backend import TMIBackend, TMIStartError, map_path_of
from environments.trackmania.tmi.link.protocol import bgra_to_gray
from environments.trackmania.tmi.games.settings import TMISettings
from environments.trackmania.track import Track, track_from_map
from rulka.collection.episodes import may_discard_episodes

from .fake_game_server import save_straight_line

MAP = "Campaign/A01-Race.Challenge.Gbx"
FINISH_Z = 25.0  # the fake's last checkpoint
ACTION_NOTHING = 3  # no key pressed
FAST_MANAGER = {"start_timeout_s": 5.0, "connect_timeout_s": 3.0, "reconnect_timeout_s": 0.5}


def fast_params(**overrides: object) -> TrackManiaEnvironmentParameters:
    """Environment parameters with ~1 s hang detection."""
    return TrackManiaEnvironmentParameters(timeout_during_run_ms=1000, timeout_between_runs_ms=5000, **overrides)


@pytest.fixture
def track(tmp_path: Path) -> Track:
    """The fake's straight road: map path for the game, reference line .npy 35 m long, a checkpoint at 10 m."""
    line = save_straight_line(tmp_path / "fake_line.npy", 35.0)
    return track_from_map(MAP, line, road_width=16.0, checkpoint_s=[10.0])


@pytest.fixture
def make_env(fake_launcher, track):
    """``make_env(per_launch=..., params=..., **manager_options)`` -> a tmi env over fake games; closed after."""
    envs: list[TrackManiaEnv] = []

    def make(per_launch: list[dict] | None = None, params: TrackManiaEnvironmentParameters | None = None,
             **manager_options: object) -> tuple[TrackManiaEnv, object]:
        launcher = fake_launcher(per_launch)
        options = {"settings": TMISettings(), "launcher": launcher,
                   "manager_options": {**FAST_MANAGER, **manager_options}}
        env = TrackManiaEnv(params or fast_params(), track=track, backend="tmi", backend_options=options)
        envs.append(env)
        return env, launcher

    yield make
    for env in envs:
        env.close()


def wait_until(predicate, timeout_s: float = 2.0) -> bool:
    """Poll ``predicate`` (the fake game runs in its own thread) for at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def run_episode(env: TrackManiaEnv, action: int, max_steps: int = 200) -> tuple[list, bool, bool, dict]:
    """Step ``action`` until the episode ends; returns (observations, terminated, truncated, last info)."""
    observations = []
    for _ in range(max_steps):
        obs, reward, terminated, truncated, info = env.step(action)
        assert np.isfinite(reward)
        observations.append(obs)
        if terminated or truncated:
            return observations, terminated, truncated, info
    raise AssertionError(f"no episode end within {max_steps} steps")


def test_tmi_backend_is_registered_and_configured_from_parameters():
    """make_backend("tmi") builds a TMIBackend whose frame size, timeouts, reboot and camera follow params."""
    params = fast_params(H_downsized=60, W_downsized=80, game_reboot_interval=3600)
    backend = make_backend("tmi", params, settings=TMISettings(), instance_index=2, running_speed=10,
                           manager_options={"max_start_attempts": 3})
    assert "tmi" in available_backends() and isinstance(backend, TMIBackend)
    cfg = backend.manager.config
    assert (cfg.frame_height, cfg.frame_width, cfg.ms_per_action) == (60, 80, 50)
    assert (cfg.timeout_during_run_ms, cfg.timeout_between_runs_ms) == (1000, 5000)
    assert cfg.game_reboot_interval_s == 3600 and cfg.game_camera == 2 and cfg.running_speed == 10
    assert cfg.max_start_attempts == 3 and backend.manager.port == TMISettings().port(2)
    with pytest.raises(TypeError):
        make_backend("tmi", params, settings=TMISettings(), manager_options={"no_such_field": 1})


def test_track_from_map_carries_map_path_and_reference_line(track):
    """A map-cycle entry (map_path, reference_line_path, road_width) makes a Track the tmi backend can load."""
    assert map_path_of(track) == MAP and track.reference_line.shape == (71, 3)
    assert track.road_width == 16.0 and track.checkpoint_positions[0, 2] == pytest.approx(10.0)


def test_race_to_finish_terminates_on_the_games_checkpoint_count(make_env):
    """Driving forward ends terminated at the game's finish (25 m), before the reference line's end (35 m)."""
    env, launcher = make_env()
    obs, info = env.reset(seed=1)
    assert info["race_time_ms"] == 0 and not info["discarded"]
    _, terminated, truncated, info = run_episode(env, ACTION_FORWARD_IDX)
    assert terminated and not truncated and info["finished"] and info["end_reason"] == "finished"
    assert info["race_time_ms"] == info["checkpoint_times_ms"][-1] > 0 and len(info["checkpoint_times_ms"]) == 2
    assert info["progress_m"] == pytest.approx(FINISH_Z, abs=1.0) and info["progress_fraction"] < 0.8
    assert launcher.servers[0].map == MAP
    env.reset(seed=2)  # second race: rewound to the saved start, same inputs -> same race time
    _, terminated, _, info2 = run_episode(env, ACTION_FORWARD_IDX)
    assert terminated and info2["race_time_ms"] == info["race_time_ms"] and launcher.servers[0].start_rewinds == 1


def test_observation_frame_and_floats_come_from_the_game(make_env):
    """The frame is the game's screenshot in grayscale; the floats place the car on the line, facing +z."""
    env, launcher = make_env()
    env.reset(seed=0)
    for _ in range(10):
        obs, *_ = env.step(ACTION_FORWARD_IDX)
    server, p, layout = launcher.servers[0], env.params, env.layout
    np.testing.assert_array_equal(obs["frame"][0], bgra_to_gray(server.frame_bgra(p.W_downsized, p.H_downsized),
                                                                 p.W_downsized, p.H_downsized))
    floats = obs["floats"]
    assert env.observation_space.contains(obs)
    velocity = floats[layout.linear_velocity]
    assert velocity[2] == pytest.approx(env.state.linear_velocity[2], rel=1e-5) and velocity[2] > 0
    centers = floats[layout.zone_centers].reshape(-1, 3)
    assert np.allclose(centers[:, :2], 0.0, atol=1e-4)  # on the line: no lateral / vertical offset
    assert np.allclose(np.diff(centers[:3, 2]), p.one_every_n_zone_centers_in_inputs * 0.5, atol=1e-3)
    assert floats[layout.gear][0] >= 1 and floats[layout.world_up][1] == pytest.approx(1.0)


def test_doing_nothing_is_cut_off_by_the_no_progress_rule(make_env):
    """A car that does not move is truncated after 2 s without a new point; the next race rewinds and finishes."""
    env, launcher = make_env()
    env.reset(seed=0)
    _, terminated, truncated, info = run_episode(env, ACTION_NOTHING)
    assert truncated and not terminated and info["end_reason"] == "no_progress" and not info["discarded"]
    assert info["race_time_ms"] == env.params.cutoff_rollout_if_no_vcp_passed_within_duration_ms
    server = launcher.servers[0]
    assert not env.backend.manager.race_active, "the cut-off must end the game's race"
    assert wait_until(lambda: server.timeout_ms == 5000), "the game must wait with the between-runs timeout"
    env.reset(seed=0)
    _, terminated, _, _ = run_episode(env, ACTION_FORWARD_IDX)
    assert terminated and server.start_rewinds == 1 and len(launcher.servers) == 1


@pytest.mark.reliability
def test_game_hang_mid_race_truncates_as_discarded_then_relaunches(make_env):
    """A game that stops answering ends the episode truncated + discarded; reset() relaunches and races."""
    env, launcher = make_env(per_launch=[{"hang_at_ms": 400}])
    # so the learner stores a race only once it has ended (none of a lost one); the simulator never loses one
    assert may_discard_episodes(env) and backend_may_discard_races("tmi") and not backend_may_discard_races("sim")
    assert not may_discard_episodes(TrackManiaEnv(fast_params()))
    env.reset(seed=0)
    t0 = time.monotonic()
    obs, terminated, truncated, info = run_episode(env, ACTION_FORWARD_IDX)
    assert truncated and not terminated and info["discarded"] and info["end_reason"] == "discarded"
    assert "timed out" in info["discard_reason"] and time.monotonic() - t0 < 5
    assert env.observation_space.contains(obs[-1])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(ACTION_FORWARD_IDX)
    assert not launcher.servers[0].is_alive(), "the hung instance must be killed"
    _, info = env.reset(seed=0)
    assert info["race_time_ms"] == 0 and len(launcher.servers) == 2
    _, terminated, _, info = run_episode(env, ACTION_FORWARD_IDX)
    assert terminated and info["finished"]


@pytest.mark.reliability
def test_dropped_connection_mid_race_truncates_as_discarded_then_reconnects(make_env):
    """A connection dropped mid-race ends the episode discarded; reset() reconnects to the same game."""
    env, launcher = make_env(per_launch=[{"drop_at_ms": 300}])
    env.reset(seed=0)
    _, terminated, truncated, info = run_episode(env, ACTION_FORWARD_IDX)
    assert truncated and not terminated and info["discarded"] and "closed" in info["discard_reason"]
    assert 0 < info["race_time_ms"] <= 300
    _, info = env.reset(seed=0)
    assert info["race_time_ms"] == 0
    _, terminated, _, _ = run_episode(env, ACTION_FORWARD_IDX)
    server = launcher.servers[0]
    assert terminated and len(launcher.servers) == 1 and server.connections == 2


def test_game_crash_at_reset_is_retried_then_recovers(make_env):
    """A game that hangs while starting is relaunched within reset() (bounded retries)."""
    env, launcher = make_env(per_launch=[{"hang_at_ms": -100}], start_timeout_s=1.0)
    _, info = env.reset(seed=0)
    assert info["race_time_ms"] == 0 and len(launcher.servers) == 2


def test_game_that_never_starts_raises_a_clear_error_at_reset(make_env, fake_launcher, track):
    """A game that keeps failing at reset() raises TMIStartError naming the port and `rulka tmi check`."""
    launcher = fake_launcher(behaviour="raw", raw_bytes=b"garbage!")
    options = {"settings": TMISettings(), "launcher": launcher, "manager_options": FAST_MANAGER}
    env = TrackManiaEnv(fast_params(), track=track, backend="tmi", backend_options=options)
    t0 = time.monotonic()
    try:
        with pytest.raises(TMIStartError, match="rulka tmi check --port"):
            env.reset(seed=0)
        assert time.monotonic() - t0 < 10
        assert sum(s.connections for s in launcher.servers) == env.backend.manager.config.max_start_attempts
        with pytest.raises(RuntimeError, match="reset"):
            env.step(ACTION_FORWARD_IDX)
    finally:
        env.close()


def test_spaces_match_the_simulator_and_check_env_passes(make_env):
    """The tmi env has the simulator's spaces for the same parameters and passes gymnasium's checker."""
    params = fast_params(H_downsized=48, W_downsized=64, n_prev_actions_in_inputs=3)
    env, _ = make_env(params=params)
    sim = TrackManiaEnv(params, track=env.track, backend_options={"render": False})
    assert env.observation_space == sim.observation_space and env.action_space == sim.action_space
    sim_obs, _ = sim.reset(seed=0)
    obs, _ = env.reset(seed=0)
    assert {k: (v.shape, v.dtype) for k, v in obs.items()} == {k: (v.shape, v.dtype) for k, v in sim_obs.items()}
    check_env(env, skip_render_check=True)


def test_rollout_discarded_is_the_backend_neutral_error():
    """The manager's RolloutDiscarded is what the env catches (RolloutDiscardedError)."""
    from environments.trackmania.tmi.games.game_instance_manager import RolloutDiscarded

    assert issubclass(RolloutDiscarded, RolloutDiscardedError)


# ---------------------------------------------------------------------- backend options (issues 8 and 10)
def test_running_speed_and_port_reach_the_game(fake_launcher, track, caplog):
    """``backend_options={"port", "running_speed"}``: the manager uses that port, the game is driven at
    that speed (and counts down at it), and a speed above TMInterface's safe 100 logs why."""
    launcher = fake_launcher()
    options = {"settings": TMISettings(), "launcher": launcher, "manager_options": FAST_MANAGER,
               "port": 9123, "running_speed": 7}
    env = TrackManiaEnv(fast_params(), track=track, backend="tmi", backend_options=options)
    try:
        assert env.backend.manager.port == 9123
        env.reset(seed=0)
        run_episode(env, ACTION_FORWARD_IDX)
        server = launcher.servers[0]
        assert 7.0 in server.speeds and "set countdown_speed 7" in server.commands
        assert not [r for r in caplog.records if "running_speed" in r.getMessage()]
    finally:
        env.close()
    with caplog.at_level("WARNING"):
        fast = make_backend("tmi", fast_params(), settings=TMISettings(), running_speed=160)
    assert fast.manager.config.running_speed == 160
    assert any("input subsystem" in r.getMessage() and "160" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match="running_speed"):
        make_backend("tmi", fast_params(), settings=TMISettings(), running_speed=0)
    with pytest.raises(ValueError, match="port"):
        make_backend("tmi", fast_params(), settings=TMISettings(), port=70000)


def test_start_timeout_is_a_generous_parameter(fake_launcher, track):
    """Point 7: the start deadline defaults to 600 s, comes from TMI_START_TIMEOUT_S or the
    ``start_timeout_s`` option, and bounds launch-to-race: a game that accepts only after 1.5 s
    starts with 4 s and fails with 1 s."""
    assert make_backend("tmi", fast_params(), settings=TMISettings()).manager.config.start_timeout_s == 600.0
    from_env = make_backend("tmi", fast_params(), settings=TMISettings(start_timeout_s=900.0))
    assert from_env.manager.config.start_timeout_s == 900.0 and from_env.manager.config.connect_timeout_s == 900.0
    slow = {"startup_ms": 1500}
    ok = make_backend("tmi", fast_params(), settings=TMISettings(), launcher=fake_launcher(**slow), start_timeout_s=4.0)
    try:
        car, _ = ok.start_race(MAP, seed=0)
        assert car.race_time_ms == 0
    finally:
        ok.close()
    short = make_backend("tmi", fast_params(), settings=TMISettings(), launcher=fake_launcher(**slow), start_timeout_s=1.0,
                         manager_options={"max_start_attempts": 1})
    try:
        with pytest.raises(TMIStartError):
            short.start_race(MAP, seed=0)
    finally:
        short.close()
