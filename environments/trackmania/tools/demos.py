"""``rulka demos record``: demonstration sets (:mod:`memories.demonstrations`) of simulator races.

A driver races a simulator track ``races`` times (reset seeds ``seed``, ``seed + 1``, ...) in the
environment a training run will use (the preset's ``environment`` section, with its ``-cp``
overrides; an exported policy brings its own), and every race is saved whole: the observations the
environment gave (frames uint8, floats), the actions, the rewards it paid, the race state after each
step (race time, speed, progress, ...) and how the race ended. Drivers:

* ``baseline``: the classical driver (:class:`~environments.trackmania.tools.baseline.BaselineDriver`)
  with the shipped margins, or with ``margins`` (e.g. the ones ``rulka baseline --tune`` prints);
* an export folder (``rulka export``): the trained policy, greedy.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.tools.record import baseline_policy
from memories.demonstrations import DemoEpisode, write_demonstrations

#: The numeric race state saved after every step (``info`` keys of :class:`TrackManiaEnv`).
RACE_STATE_KEYS = ("race_time_ms", "progress_m", "progress_fraction", "speed_kmh", "gear", "zone",
                   "distance_to_finish_m", "finished")


@dataclass
class RecordedRace:
    """One race written: its reset seed, actions, race time, whether it finished, and why it ended."""

    seed: int
    steps: int
    race_time_ms: int
    finished: bool
    end_reason: str


def race_once(env: TrackManiaEnv, act: Callable[[dict[str, np.ndarray]], int], seed: int,
              max_steps: int | None = None) -> tuple[DemoEpisode, RecordedRace]:
    """Drive one race of ``env`` from reset seed ``seed`` with ``act(observation) -> action``."""
    obs, info = env.reset(seed=seed)
    states = {k: [np.array(v, copy=True)] for k, v in obs.items()}
    actions, rewards, race_state = [], [], {k: [] for k in RACE_STATE_KEYS}
    terminated = truncated = False
    limit = max_steps or 10 ** 9
    while not (terminated or truncated) and len(actions) < limit:
        action = int(act(obs))
        obs, reward, terminated, truncated, info = env.step(action)
        if info.get("discarded"):
            raise RuntimeError(f"the backend lost race {seed}: {info.get('discard_reason')}")
        for k, v in obs.items():
            states[k].append(np.array(v, copy=True))
        actions.append(action)
        rewards.append(reward)
        for k in RACE_STATE_KEYS:
            race_state[k].append(float(info[k]))
    if not (terminated or truncated):
        truncated = True  # cut by max_steps: the memory bootstraps from the last state
    end = info["end_reason"] or ("finished" if info["finished"] else "cut")
    episode = DemoEpisode({k: np.stack(v) for k, v in states.items()}, np.asarray(actions, np.int64),
                          np.asarray(rewards, np.float32), bool(terminated), bool(truncated), end,
                          {k: np.asarray(v) for k, v in race_state.items()})
    return episode, RecordedRace(seed, len(actions), int(info["race_time_ms"]), bool(info["finished"]), end)


def driver_race_as_inputs(params: TrackManiaEnvironmentParameters, track: str, out: str | Path,
                          margins: Any = None) -> tuple[DemoEpisode, RecordedRace]:
    """The classical driver's race on ``track`` in the simulator, with ``params`` (a real-game
    configuration is raced with backend ``sim``) and no start jitter, from reset seed 0, written to
    ``out`` as a TMInterface inputs script (what a user replays through the game); returns the race.
    ``margins``: the driver's tuned margins (None: the shipped ones)."""
    from environments.trackmania.tmi.maps.inputs_export import export_inputs

    sim = TrackManiaEnv(dataclasses.replace(params, backend="sim"), track=track,
                        backend_options={"start_lateral_jitter_m": 0.0, "start_heading_jitter_rad": 0.0})
    try:
        driven, race = race_once(sim, baseline_policy(sim, margins), seed=0)
    finally:
        sim.close()
    export_inputs(out, driven.actions, ms_per_action=params.ms_per_action)
    return driven, race


def record_demonstrations(out: str | Path, track: str, races: int, *, policy: str = "baseline",
                          params: TrackManiaEnvironmentParameters | None = None, margins: Any = None,
                          seed: int = 0, max_steps: int | None = None,
                          progress: Callable[[str], None] | None = None) -> list[RecordedRace]:
    """Record ``races`` races of ``policy`` (``baseline`` or an export folder) on ``track`` into ``out``.

    ``params`` is the environment of the run that will learn from them (default: the environment
    section's defaults); an exported policy uses its own run's environment, on the simulator.
    """
    if races < 1:
        raise ValueError(f"races must be at least 1, got {races}")
    source: dict[str, Any] = {"recorder": "rulka demos record", "track": str(track), "policy": str(policy),
                              "seed": int(seed)}
    if policy == "baseline":
        params = params or TrackManiaEnvironmentParameters(backend="sim")
        env = TrackManiaEnv(params=dataclasses.replace(params, backend="sim"), track=track)
        act = baseline_policy(env, margins)
        source["margins"] = str(margins) if margins is not None else "shipped"
    else:
        from rulka.policy import load_policy

        trained = load_policy(policy)
        params = dataclasses.replace(trained.config.environment, backend="sim")
        env = TrackManiaEnv(params=params, track=track)
        act = lambda obs: int(trained.predict(obs, deterministic=True))  # noqa: E731
    source["ms_per_action"] = int(params.ms_per_action)
    episodes, recorded = [], []
    try:
        for i in range(races):
            episode, race = race_once(env, act, seed + i, max_steps)
            episodes.append(episode)
            recorded.append(race)
            if progress is not None:
                status = (f"finished in {race.race_time_ms / 1000:.2f} s" if race.finished
                          else f"not finished ({race.end_reason})")
                progress(f"race {i + 1}/{races} (reset seed {race.seed}): {race.steps} actions, {status}")
    finally:
        env.close()
    write_demonstrations(out, episodes, source, int(env.action_space.n))
    return recorded


def best_run_demonstrations(best_run: str | Path, out: str | Path, run_seed: int = 0) -> RecordedRace:
    """A one-race demonstration set from a training run's best race (``RUN_DIR/best_runs/MAP`` or one
    of its ``.json`` files): its actions played again from its reset seed in the run's environment
    (the simulator is deterministic); refused (ReplayError) when no replay reproduces the saved race
    (:func:`~environments.trackmania.tools.race_replay.replay_best_run`: race time, and speeds when saved)."""
    from environments.trackmania.tools.race_replay import load_best_run, replay_best_run, run_environment

    best = load_best_run(best_run)
    params, track = run_environment(best)
    _, _, seed = replay_best_run(best, params, track, run_seed)
    env = TrackManiaEnv(params=params, track=track, backend="sim")
    actions = iter(best.actions)
    try:
        episode, race = race_once(env, lambda obs: next(actions), seed, max_steps=len(best.actions))
    finally:
        env.close()
    source = {"recorder": "rulka demos from-best-run", "best_run": str(best.json_path), "track": best.map_name,
              "policy": "best run", "seed": seed, "ms_per_action": int(params.ms_per_action)}
    write_demonstrations(out, [episode], source, int(env.action_space.n))
    return race
