"""Trajectories: what drive() samples (the car's own state, once per action) and the .npz round trip."""
from __future__ import annotations

import numpy as np

from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.tools.trajectory import Trajectory, drive


def test_drive_samples_the_car_after_every_action_and_round_trips(tmp_path):
    """T actions give T + 1 samples: position and heading are the simulator car's, time advances 50 ms
    per action, the actions are the ones played; save/load keeps every field."""
    env = TrackManiaEnv(track="short", backend_options={"render": False})
    trajectory, frames = drive(env, lambda step: 0 if step < 30 else 2, seed=3, max_steps=40)
    car = env.backend.car
    assert trajectory.steps == 40 and len(trajectory.positions) == 41 and frames == []
    assert np.allclose(trajectory.positions[-1], [car.x, car.y, car.z])
    assert np.isclose(trajectory.headings[-1], car.psi)
    assert trajectory.race_time_ms.tolist() == [50 * k for k in range(41)]
    assert trajectory.actions.tolist() == [0] * 30 + [2] * 10
    assert trajectory.speeds_kmh[0] == 0 and trajectory.speeds_kmh[-1] > 30 and trajectory.progress_m[-1] > 5
    loaded = Trajectory.load(trajectory.save(tmp_path / "t.npz"))
    for name in ("positions", "headings", "speeds_kmh", "race_time_ms", "progress_m", "actions"):
        assert np.array_equal(getattr(loaded, name), getattr(trajectory, name))
    assert (loaded.finished, loaded.end_reason, loaded.track) == (False, "", "short")
    replayed, _ = drive(env, trajectory.actions.tolist(), seed=3)  # a list of actions: stops when it runs out
    assert np.array_equal(replayed.positions, trajectory.positions)
