"""TrackManiaEnv: gymnasium compliance, registration, seeding, backends, observations on every track."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import environments.trackmania  # noqa: F401  (registers the env id)
from environments.trackmania import ENV_ID
from environments.trackmania.backend_registry import available_backends, make_backend, register_backend
from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.sim.backend import SimBackend
from environments.trackmania.tracks import BUILTIN_TRACK_NAMES, get_track
from tests.environments.trackmania.helpers import require_hockolicious


def test_check_env_passes():
    """gymnasium's env checker accepts the environment."""
    check_env(TrackManiaEnv(track="short"), skip_render_check=True)


def test_registered_id_makes_the_env_with_the_documented_spaces():
    """``rulka/TrackManiaSim-v0`` is registered on import and has Dict(frame, floats) x Discrete(12)."""
    env = gym.make(ENV_ID)
    obs, info = env.reset(seed=0)
    assert env.action_space == gym.spaces.Discrete(12)
    assert obs["frame"].shape == (1, 120, 160) and obs["frame"].dtype == np.uint8
    assert obs["floats"].shape == (184,) and obs["floats"].dtype == np.float32
    assert env.observation_space.contains(obs)
    assert info["track"] == "short"
    env.close()


def _rollout(env, seed, n=60):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(123)
    out = [obs["floats"].copy()]
    frames = [obs["frame"].copy()]
    for _ in range(n):
        obs, *_ = env.step(int(rng.choice([0, 1, 2, 0, 6])))
        out.append(obs["floats"].copy())
        frames.append(obs["frame"].copy())
    return np.stack(out), np.stack(frames)


def test_seeded_resets_are_reproducible():
    """The same seed reproduces the episode bit for bit; another seed changes the start."""
    env = TrackManiaEnv(track="short")
    a, fa = _rollout(env, 5)
    b, fb = _rollout(env, 5)
    c, _ = _rollout(env, 6)
    assert np.array_equal(a, b) and np.array_equal(fa, fb)
    assert not np.array_equal(a[0], c[0])


def test_observations_are_returned_as_fresh_arrays():
    """Returned observations are not overwritten by later steps (safe to store in a replay memory)."""
    env = TrackManiaEnv(track="short")
    obs0, _ = env.reset(seed=0)
    snapshot = {k: v.copy() for k, v in obs0.items()}
    for _ in range(5):
        env.step(0)
    assert all(np.array_equal(obs0[k], snapshot[k]) for k in obs0)


@pytest.mark.parametrize("name", list(BUILTIN_TRACK_NAMES) + ["procedural:3", "loop:5"])
def test_frame_and_float_observations_on_every_track(name):
    """Every built-in and generated track yields valid frame + float observations that move with the car."""
    env = TrackManiaEnv(track=name)
    obs, _ = env.reset(seed=0)
    for _ in range(30):
        obs2, *_ = env.step(0)
    assert env.observation_space.contains(obs2)
    assert np.isfinite(obs2["floats"]).all()
    assert not np.array_equal(obs["frame"], obs2["frame"])
    assert obs2["frame"].std() > 5


def test_hockolicious_observations():
    """The real Hockolicious line loads as a track and gives observations."""
    require_hockolicious()
    env = TrackManiaEnv(track="hockolicious")
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(0)
    assert env.observation_space.contains(obs)
    assert len(env.track.reference_line) == 8062


def test_backends_are_selected_through_the_registry():
    """'sim' is built by the registry, unknown names fail clearly, and a registered backend is used by the env."""
    assert "sim" in available_backends()
    params = TrackManiaEnv(track="short").params
    assert isinstance(make_backend("sim", params), SimBackend)
    with pytest.raises(KeyError):
        make_backend("no_such_backend", params)

    class Recording(SimBackend):
        starts = 0

        def start_race(self, track, seed):
            Recording.starts += 1
            return super().start_race(track, seed)

    register_backend("recording-test", lambda p, **kw: Recording(p))
    env = TrackManiaEnv(track="short", backend="recording-test")
    env.reset(seed=0)
    assert Recording.starts == 1 and env.backend_name == "recording-test"


def test_info_carries_race_progress_and_car_data():
    """info has race time, progress, finished flag, furthest point, speed, zone and track name."""
    env = TrackManiaEnv(track="short", backend_options={"render": False})
    env.reset(seed=0)
    for _ in range(40):
        _, _, _, _, info = env.step(0)
    for key in ("race_time_ms", "progress_m", "finished", "furthest_zone", "furthest_progress_m", "speed_kmh",
                "zone", "track", "distance_to_finish_m"):
        assert key in info
    assert info["race_time_ms"] == 40 * 50
    assert info["progress_m"] > 10 and info["speed_kmh"] > 50 and not info["finished"]
    assert info["distance_to_finish_m"] == pytest.approx(get_track("short").length_m - info["progress_m"], abs=3.0)
