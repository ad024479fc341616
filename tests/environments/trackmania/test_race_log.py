"""RaceLog's best runs: the reset seed is kept, and on the simulator the race's trajectory, map and speed
chart are written at race end (a replay without rendering), quickly."""
from __future__ import annotations

import json

import numpy as np
from PIL import Image

from environments.trackmania.trajectory import Trajectory
from tests.environments.trackmania.best_run_helpers import ENV_STEPS, EPISODE, INSTANCE, logged_best_run


def test_best_run_keeps_its_reset_seed_and_the_replayed_trajectory_and_pictures(tmp_path):
    """The json names the seed of the race's reset (from run seed, instance, episode); the .npz is the
    race itself (it ends where the race ended, at its race time); map and speed PNGs are written."""
    run = logged_best_run(tmp_path / "run")
    folder = run.run_dir / "best_runs" / "short"
    stem = f"{run.race_time_ms}ms_{ENV_STEPS}steps"
    saved = json.loads((folder / f"{stem}.json").read_text())
    assert saved["reset_seed"] == run.seed
    assert (saved["instance"], saved["episode"]) == (INSTANCE, EPISODE)
    assert saved["actions"] == run.actions
    trajectory = Trajectory.load(folder / f"{stem}.npz")
    assert trajectory.finished and int(trajectory.race_time_ms[-1]) == run.race_time_ms
    assert np.allclose(trajectory.positions[-1], run.final_position, atol=1e-3)
    assert trajectory.actions.tolist() == run.actions
    for suffix in ("_map.png", "_speed.png", ".gif", ".inputs"):
        assert (folder / f"{stem}{suffix}").is_file()
    assert Image.open(folder / f"{stem}_map.png").size[0] >= 800
    assert not list(folder.glob("*.webp"))  # the animation is left to `rulka record --best-run`
    assert len(run.race_log.best_run_seconds) == 1 and run.race_log.best_run_seconds[0] < 10.0


def test_without_pictures_the_best_run_is_saved_as_before(tmp_path):
    """A RaceLog not told how to replay (e.g. the real game) writes json, .inputs and GIF only."""
    run = logged_best_run(tmp_path / "run", pictures=False)
    folder = run.run_dir / "best_runs" / "short"
    assert sorted(p.suffix for p in folder.iterdir()) == [".gif", ".inputs", ".json"]
    saved = json.loads(next(folder.glob("*.json")).read_text())
    assert saved["reset_seed"] is None and saved["episode"] == EPISODE
