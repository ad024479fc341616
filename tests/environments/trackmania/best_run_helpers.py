"""A training run's folder made by hand: config snapshot, races.csv and one best run logged by RaceLog.

The race is the classical driver on ``short`` with a few random actions (a race no driver would drive
twice), reset with the seed a collector would give episode ``EPISODE`` of instance ``INSTANCE``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from environments.trackmania.tools.baseline import BaselineDriver
from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig
from environments.trackmania.training.race_log import RaceLog
from environments.trackmania.tracks import resolve_track
from rulka.collection.collector import episode_seed
from rulka.collection.episodes import EpisodeRecord
from rulka.collection.rollout import EpisodeSpec, Rollout
from rulka.config import apply_overrides, write_config_snapshot
from rulka.core_types import RunPhase

RUN_SEED, INSTANCE, EPISODE = 7, 1, 3
ENV_STEPS = 1000


@dataclass
class LoggedRun:
    run_dir: Path
    race_log: RaceLog
    config: TrackManiaExperimentConfig
    seed: int
    actions: list[int]
    race_time_ms: int
    final_position: np.ndarray


def noisy_driver_episode(params, seed: int, noise: float = 0.05) -> tuple[EpisodeRecord, list[int], np.ndarray]:
    """One finished race of the driver with ``noise`` random actions, as the learner receives it."""
    track = resolve_track("short")
    env = TrackManiaEnv(params=params, track=track)
    driver = BaselineDriver(track)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed, options={"track": track})
    frames, actions, speeds, times = [obs["frame"].copy()], [], [], []
    done = False
    while not done:
        action = driver.act(env.state)
        action = int(rng.integers(12)) if rng.random() < noise else action
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        frames.append(obs["frame"].copy())
        actions.append(action)
        speeds.append(info["speed_kmh"])
        times.append(info["race_time_ms"])
    final_position = env.state.position.copy()
    env.close()
    assert info["finished"], "the noisy driver should finish short"
    spec = EpisodeSpec(reset_options={"track": track}, explore=True, tag="short")
    rollout = Rollout(source=(0, 0, INSTANCE), episode=EPISODE + 1, spec=spec, phase=RunPhase.TRAIN,
                      states={"frame": np.stack(frames)}, actions=np.asarray(actions, np.int64),
                      was_greedy=np.zeros(len(actions), bool), rewards=np.zeros(len(actions), np.float32),
                      step_info={"speed_kmh": np.asarray(speeds), "race_time_ms": np.asarray(times, np.float64)},
                      terminated=True, episode_return=1.0, episode_length=len(actions), final_info=info)
    return EpisodeRecord(spec, RunPhase.TRAIN, rollout.source, [rollout]), actions, final_position


def logged_best_run(run_dir: Path, pictures: bool = True) -> LoggedRun:
    """A run folder whose RaceLog saved one best run on ``short`` (races.csv has earlier races too)."""
    config = apply_overrides(TrackManiaExperimentConfig(), overrides=[
        "environment.W_downsized=64", "environment.H_downsized=48",
        "map_cycle.entries=[{short_name: short, map_path: short}]"])
    run_dir.mkdir(parents=True, exist_ok=True)
    write_config_snapshot(config, run_dir / "config_snapshot.yaml")
    log = RaceLog(run_dir, lambda values: None, config.environment.ms_per_action)
    if pictures:
        log.enable_pictures(config.environment, RUN_SEED)
    with open(run_dir / "races.csv", "w", encoding="utf-8") as f:  # earlier races: EPISODE of them on INSTANCE
        f.write("wall_time_s,env_steps,map,exploration,finished,race_time_s,progress_fraction,return,end_reason,"
                "instance\n")
        for k, instance in enumerate([0, INSTANCE, 0, INSTANCE, INSTANCE]):
            f.write(f"{k}.0,{100 * k},short,1,0,3.00,0.1000,-1.000,no_progress,{instance}\n")
    seed = episode_seed(RUN_SEED, INSTANCE, EPISODE)
    record, actions, final_position = noisy_driver_episode(config.environment, seed)
    race = log.record(record, ENV_STEPS, 10.0)
    assert race.finished
    return LoggedRun(run_dir, log, config, seed, actions, int(round(race.race_time_s * 1000)), final_position)
