"""Replaying saved best runs in the simulator: the same race time, the seed recovered for best runs
saved before it was kept, and clear errors."""
from __future__ import annotations

import json

import pytest

from environments.trackmania.tools.race_replay import (
    ReplayError,
    candidate_seeds,
    driver_trajectory,
    load_best_run,
    replay_best_run,
    run_environment,
)
from tests.environments.trackmania.best_run_helpers import RUN_SEED, logged_best_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return logged_best_run(tmp_path_factory.mktemp("replay") / "run", pictures=False)


def test_replaying_a_best_run_reproduces_its_race_time(run):
    """The folder's fastest run, replayed from its saved seed and actions, finishes in the saved time."""
    best = load_best_run(run.run_dir / "best_runs" / "short")
    params, track = run_environment(best)
    trajectory, frames, seed = replay_best_run(best, params, track, run_seed=RUN_SEED)
    assert seed == run.seed and frames == []
    assert trajectory.finished and int(trajectory.race_time_ms[-1]) == run.race_time_ms
    assert trajectory.actions.tolist() == run.actions


def test_a_best_run_saved_without_its_seed_is_matched_to_its_races_csv_row(run, tmp_path):
    """Old best runs (actions only): the row's instance and episode number give the seed back."""
    best_json = next((run.run_dir / "best_runs" / "short").glob("*.json"))
    data = json.loads(best_json.read_text())
    old = {k: data[k] for k in ("map", "race_time_s", "env_steps", "exploration", "actions")}
    best_json.write_text(json.dumps(old))
    try:
        best = load_best_run(best_json)
        params, track = run_environment(best)
        assert candidate_seeds(best, RUN_SEED)[0] == run.seed  # the row's episode first, then its neighbours
        trajectory, _, seed = replay_best_run(best, params, track, run_seed=RUN_SEED)
        assert seed == run.seed and int(trajectory.race_time_ms[-1]) == run.race_time_ms
        best.env_steps += 1  # no such row
        with pytest.raises(ReplayError, match="cannot be recovered"):
            replay_best_run(best, params, track, run_seed=RUN_SEED)
    finally:
        best_json.write_text(json.dumps(data))


def test_other_actions_do_not_pass_for_the_saved_race(run):
    """A replay is checked: changed actions raise ReplayError naming the saved time."""
    best = load_best_run(run.run_dir / "best_runs" / "short")
    best.actions = [3] * 40 + best.actions[40:]  # coast for 2 s at the start
    params, track = run_environment(best)
    with pytest.raises(ReplayError, match=f"{best.race_time_s:.2f} s"):
        replay_best_run(best, params, track)


def test_missing_best_runs_and_run_settings_are_named(tmp_path):
    """An empty folder, a missing file and a best run moved out of its run folder: each a clear error."""
    with pytest.raises(ReplayError, match="no best run"):
        load_best_run(tmp_path)
    with pytest.raises(ReplayError, match="not found"):
        load_best_run(tmp_path / "nope.json")
    moved = tmp_path / "a" / "b" / "c.json"
    moved.parent.mkdir(parents=True)
    moved.write_text(json.dumps({"map": "short", "race_time_s": 1.0, "env_steps": 1, "exploration": True,
                                 "actions": [0]}))
    with pytest.raises(ReplayError, match="config_snapshot.yaml"):
        run_environment(load_best_run(moved))


def test_the_driver_races_the_same_track(run):
    """The classical driver's trajectory finishes short, along the track (progress reaches its length)."""
    best = load_best_run(run.run_dir / "best_runs" / "short")
    params, track = run_environment(best)
    trajectory = driver_trajectory(track, params)
    assert trajectory.finished
    assert trajectory.progress_m[-1] > 0.95 * track.length_m
