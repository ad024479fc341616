"""RaceLog's best runs: the reset seed is kept, and on the simulator the race's trajectory, map and speed
chart are written at race end (a replay without rendering), quickly."""
from __future__ import annotations

import json

import numpy as np
from PIL import Image

from environments.trackmania.tools.trajectory import Trajectory
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


def test_best_runs_from_a_real_collector_name_the_seed_it_used(tmp_path):
    """Races collected by rulka's Collector (its own reset seeds, instance 2, run seed 5): every best run
    replays from its saved seed to the same race, speed for speed, and with any other seed it does not."""
    from types import SimpleNamespace

    from environments.trackmania.tools.baseline import BaselineDriver
    from environments.trackmania.env import TrackManiaEnv, trackmania_spaces
    from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig
    from environments.trackmania.training.race_log import RACE_INFO_KEYS, RaceLog
    from environments.trackmania.tools.race_replay import load_best_run, replay, replay_best_run, run_environment
    from environments.trackmania.tracks import resolve_track
    from filters import InputFilter, OutputFilter
    from rulka.collection.collector import Collector
    from rulka.collection.episodes import EpisodeGatherer
    from rulka.collection.rollout import EpisodePlan, EpisodeSpec
    from rulka.config import apply_overrides, write_config_snapshot
    from rulka.core_types import ActionInfo
    from rulka.level_manager import LevelManager

    config = apply_overrides(TrackManiaExperimentConfig(), overrides=[
        "environment.W_downsized=64", "environment.H_downsized=48",
        "map_cycle.entries=[{short_name: short, map_path: short}]"])
    write_config_snapshot(config, tmp_path / "config_snapshot.yaml")
    track = resolve_track("short")
    env = TrackManiaEnv(params=config.environment, track=track)
    driver, rng = BaselineDriver(track), np.random.default_rng(0)

    def act(batch, phase):  # the driver, with a random action one time in ten
        if env.state.race_time_ms == 0:
            driver.reset()
        action = driver.act(env.state) if rng.random() > 0.1 else int(rng.integers(12))
        return ActionInfo(np.array([action]), np.array([True]))

    agent = SimpleNamespace(observation_space=trackmania_spaces(config.environment)[0], act=act,
                            counters=SimpleNamespace(gradient_updates=0))

    class ShortPlan(EpisodePlan):
        def next_episode(self):
            return EpisodeSpec(reset_options={"track": track}, tag="short")

    collector = Collector(agent, [LevelManager(agent, env, InputFilter(), OutputFilter())], [ShortPlan()], seed=5,
                          instances=[2], info_keys=RACE_INFO_KEYS)
    gatherer, log = EpisodeGatherer(keep_steps=True), RaceLog(tmp_path, lambda values: None, 50)
    log.enable_pictures(config.environment, 5)
    races = 0
    while races < 2:
        for rollout in collector.step(heatup=False):
            record = gatherer.add(rollout)
            if record is not None:
                races += 1
                log.record(record, 1000 * races, float(races))
    paths = sorted((tmp_path / "best_runs" / "short").glob("*.json"))
    assert paths, "no race finished"
    for path in paths:
        best = load_best_run(path)
        params, track = run_environment(best)
        trajectory, _, seed = replay_best_run(best, params, track)
        assert seed == best.reset_seed and int(trajectory.race_time_ms[-1]) == best.race_time_ms
        assert path.with_name(f"{path.stem}_map.png").is_file()
        other, _ = replay(best, params, track, seed + 1)
        assert not np.allclose(other.speeds_kmh[1:len(best.speeds_kmh) + 1], best.speeds_kmh[:other.steps],
                               atol=0.011)
