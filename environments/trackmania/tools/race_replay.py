"""Replaying a saved best run in the simulator, and racing the classical driver on the same track.

A best run (``best_runs/<map>/<ms>ms_<steps>steps.json``, written by
:class:`~environments.trackmania.training.race_log.RaceLog`) keeps the actions and the reset seed of the race;
the simulator is deterministic, so resetting with that seed and playing the actions again drives the
same race (checked: the replay must finish in the saved race time, at the saved speed after every
action). Best runs saved before the seed was kept are matched to their row of the run's
``races.csv``: the row's instance and its episode number on that instance give the seed the
collector used (checked by the race time only: those files kept no speeds).
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
import numpy as np

from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.track import Track
from environments.trackmania.tools.trajectory import Trajectory, drive
from rulka.collection.collector import episode_seed

#: Episode numbers tried around the one read from races.csv when recovering an old best run's seed.
SEED_SEARCH_RADIUS = 3


class ReplayError(ValueError):
    """A best run that cannot be replayed (missing files, another backend, or a replay that differs)."""


@dataclass
class BestRun:
    """One saved best run: where it is, its race and what a replay needs."""

    json_path: Path
    map_name: str
    race_time_s: float
    env_steps: int
    exploration: bool
    actions: list[int]
    reset_seed: int | None = None
    instance: int | None = None
    episode: int | None = None
    #: Speed after each action as the race reported it (None in best runs saved before it was kept), km/h.
    speeds_kmh: list[float] | None = None

    @property
    def race_time_ms(self) -> int:
        return int(round(self.race_time_s * 1000))

    @property
    def stem(self) -> str:
        return self.json_path.stem

    @property
    def run_dir(self) -> Path:
        """The training run's folder (``<run>/best_runs/<map>/<stem>.json``)."""
        return self.json_path.parents[2]


def load_best_run(path: str | Path) -> BestRun:
    """The best run at ``path``: a ``.json`` file, or a ``best_runs/<map>`` folder (its fastest run)."""
    path = Path(path)
    if path.is_dir():
        runs = sorted(path.glob("*.json"), key=lambda p: (json.loads(p.read_text())["race_time_s"], p.name))
        if not runs:
            raise ReplayError(f"{path}: no best run (.json) in this folder; give RUN_DIR/best_runs/<map>")
        path = runs[0]
    if not path.is_file():
        raise ReplayError(f"best run not found: {path}; give RUN_DIR/best_runs/<map> or one of its .json files")
    data = json.loads(path.read_text())
    try:
        return BestRun(json_path=path, map_name=str(data["map"]), race_time_s=float(data["race_time_s"]),
                       env_steps=int(data["env_steps"]), exploration=bool(data["exploration"]),
                       actions=[int(a) for a in data["actions"]], reset_seed=data.get("reset_seed"),
                       instance=data.get("instance"), episode=data.get("episode"), speeds_kmh=data.get("speeds_kmh"))
    except KeyError as missing:
        raise ReplayError(f"{path}: not a best run (no {missing} entry)") from None


def run_environment(best: BestRun) -> tuple[TrackManiaEnvironmentParameters, Track]:
    """The environment parameters and the track of ``best``'s race, from its run's ``config_snapshot.yaml``."""
    from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig
    from environments.trackmania.training.map_cycle import cycle_entries, entry_track
    from environments.trackmania.tracks import resolve_track
    from rulka.config import apply_dict, load_yaml_file

    snapshot = best.run_dir / "config_snapshot.yaml"
    if not snapshot.is_file():
        raise ReplayError(f"{snapshot} not found: the best run must stay in its run folder "
                          "(RUN_DIR/best_runs/<map>/) to be replayed with the run's settings")
    config = apply_dict(TrackManiaExperimentConfig(), load_yaml_file(snapshot))
    params = config.environment
    if params.backend != "sim":
        raise ReplayError(f"{best.json_path}: raced on the '{params.backend}' backend; only simulator races "
                          "can be replayed here (load the .inputs file in TMInterface for the real game)")
    for entry in cycle_entries(config):
        if entry.short_name == best.map_name:
            track = entry_track(entry, "sim")
            return params, track if isinstance(track, Track) else resolve_track(track)
    raise ReplayError(f"{best.json_path}: map '{best.map_name}' is not in the run's map_cycle")


def replay(best: BestRun, params: TrackManiaEnvironmentParameters, track: Track, seed: int,
           renderer=None) -> tuple[Trajectory, list[np.ndarray]]:
    """Play ``best``'s actions from a reset with ``seed``; the trajectory (and frames with ``renderer``)."""
    from environments.trackmania.env import TrackManiaEnv

    env = TrackManiaEnv(params=params, track=track, backend="sim", backend_options={"render": False})
    try:
        return drive(env, best.actions, seed=seed, renderer=renderer)
    finally:
        env.close()


def matches(best: BestRun, trajectory: Trajectory) -> bool:
    """The replay finished on the last action, in the saved race time, at the saved speeds (when kept)."""
    same = (trajectory.finished and trajectory.steps == len(best.actions)
            and int(trajectory.race_time_ms[-1]) == best.race_time_ms)
    if same and best.speeds_kmh is not None:
        same = len(best.speeds_kmh) == trajectory.steps and bool(
            np.allclose(trajectory.speeds_kmh[1:], best.speeds_kmh, atol=0.011))
    return same


def candidate_seeds(best: BestRun, run_seed: int) -> list[int]:
    """Reset seeds to try for ``best``: its own, else those of its ``races.csv`` row's episode and neighbours."""
    if best.reset_seed is not None:
        return [int(best.reset_seed)]
    if best.instance is not None and best.episode is not None:
        return [episode_seed(run_seed, int(best.instance), int(best.episode))]
    races = best.run_dir / "races.csv"
    if not races.is_file():
        raise ReplayError(f"{best.json_path} has no reset seed and {races} is missing to recover it")
    rows = list(csv.DictReader(races.open(encoding="utf-8")))
    for index, row in enumerate(rows):
        if (row["map"] == best.map_name and row["finished"] == "1" and int(row["env_steps"]) == best.env_steps
                and abs(float(row["race_time_s"]) - best.race_time_s) < 0.006):
            instance = int(row.get("instance") or 0)
            episode = sum(1 for r in rows[:index] if int(r.get("instance") or 0) == instance)
            order = sorted(range(max(0, episode - SEED_SEARCH_RADIUS), episode + SEED_SEARCH_RADIUS + 1),
                           key=lambda k: abs(k - episode))
            return [episode_seed(run_seed, instance, k) for k in order]
    raise ReplayError(f"{best.json_path}: no finished race at {best.race_time_s:.2f} s after {best.env_steps} "
                      f"actions in {races}, so its reset seed cannot be recovered")


def replay_best_run(best: BestRun, params: TrackManiaEnvironmentParameters, track: Track, run_seed: int = 0,
                    renderer=None) -> tuple[Trajectory, list[np.ndarray], int]:
    """Replay ``best`` deterministically: its trajectory, frames (with ``renderer``) and reset seed.

    Raises ReplayError when no candidate seed reproduces the saved race time.
    """
    tried = []
    seeds = candidate_seeds(best, run_seed)
    for seed in seeds:
        if len(seeds) == 1:  # the seed is known: one replay, frames included
            trajectory, frames = replay(best, params, track, seed, renderer)
            if matches(best, trajectory):
                return trajectory, frames, seed
        else:
            trajectory, _ = replay(best, params, track, seed)
        tried.append(f"seed {seed}: {'finished' if trajectory.finished else 'did not finish'} in "
                     f"{trajectory.race_time_s:.2f} s")
        if matches(best, trajectory):
            if renderer is None:
                return trajectory, [], seed
            trajectory, frames = replay(best, params, track, seed, renderer)
            return trajectory, frames, seed
    raise ReplayError(f"{best.json_path}: replaying the actions does not reproduce the saved "
                      f"{best.race_time_s:.2f} s ({'; '.join(tried)}); was the run's seed (--run-seed) {run_seed}?")


def driver_trajectory(track: Track, params: TrackManiaEnvironmentParameters, seed: int = 0,
                      margins=None) -> Trajectory:
    """The classical driver's race on ``track`` (``margins``: None for the shipped ones), physics only."""
    from environments.trackmania.tools.baseline import BaselineDriver
    from environments.trackmania.env import TrackManiaEnv

    env = TrackManiaEnv(params=params, track=track, backend="sim", backend_options={"render": False})
    driver = BaselineDriver(track, margins=margins)
    limit = params.cutoff_rollout_if_race_not_finished_within_duration_ms // params.ms_per_action + 1
    try:
        trajectory, _ = drive(env, lambda step: driver.act(env.state), seed=seed, max_steps=limit)
    finally:
        env.close()
    return trajectory
