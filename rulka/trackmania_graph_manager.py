"""The TrackMania graph manager: episodes follow the map cycle, as in Linesight.

Each episode takes the next entry of ``map_cycle.entries`` (each repeated ``repeat`` times): its
track, whether it explores (``is_exploration``: the exploration policy) or races greedily (the
evaluation of that map), and whether its transitions are stored (``fill_buffer``). Training runs
between actions as the replay-ratio gate allows. Per map it logs race time, finished ratio,
progress and best time, and it keeps each map's best run (actions, ``.inputs`` text and a GIF).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.experiment_parameters import TrackManiaExperimentConfig
from environments.trackmania.record import write_gif
from rulka.config import ConfigError
from rulka.core_types import RunPhase
from rulka.graph_manager import BasicRLGraphManager, RunSummary
from rulka.parameters import MapCycleEntry, PresetValidationParameters
from rulka.progress import ProgressBar

#: Physical road width given to real-game tracks (only drawn by the simulator's renderer), m.
TMI_ROAD_WIDTH_M = 24.0
#: Races per map and kind over which the logged finished ratio is computed.
RATIO_WINDOW = 20
SIM_PRESET_HINT = "rulka -p trackmania_iqn_sim (the same agent on the built-in simulator)"


@dataclass
class RaceResult:
    map_name: str
    exploration: bool
    finished: bool
    race_time_s: float
    progress_fraction: float
    episode_return: float
    env_steps: int
    wall_time_s: float
    end_reason: str = ""


def _track_key(entry: MapCycleEntry) -> tuple[str, str]:
    return entry.map_path, entry.reference_line_path


class TrackManiaGraphManager(BasicRLGraphManager):
    """Args: as :class:`BasicRLGraphManager`; ``backend_options`` go to the environment's backend."""

    config: TrackManiaExperimentConfig

    def __init__(self, agent_class: type, config: TrackManiaExperimentConfig,
                 preset_validation_params: PresetValidationParameters | None = None,
                 backend_options: dict[str, Any] | None = None) -> None:
        super().__init__(agent_class, config, preset_validation_params=preset_validation_params,
                         env_factory=self._first_map_env)
        self.backend_options = backend_options or {}
        self.envs: dict[tuple[str, str], gym.Env] = {}
        self.cycle_position = 0
        self.best_race_time_s: dict[str, float] = {}
        self.races: list[RaceResult] = []
        #: Set (from another thread, e.g. a wall-time budget) to stop after the current race.
        self.stop_requested = False

    # ------------------------------------------------------------------ environments
    def cycle(self) -> list[MapCycleEntry]:
        entries = [e for e in self.config.map_cycle.entries for _ in range(e.repeat)]
        if not entries:
            raise ConfigError("map_cycle.entries is empty: give at least one map to race on")
        return entries

    def make_env(self, entry: MapCycleEntry) -> gym.Env:
        params = self.config.environment
        track: Any = entry.reference_line_path or entry.map_path
        if params.backend == "tmi":
            if not entry.reference_line_path:
                raise ConfigError(f"map_cycle entry '{entry.short_name}' needs a reference_line_path for the real game")
            from environments.trackmania.track import track_from_map

            track = track_from_map(entry.map_path, entry.reference_line_path, road_width=TMI_ROAD_WIDTH_M,
                                   name=entry.short_name)
        try:
            return TrackManiaEnv(params, track=track, backend=params.backend, backend_options=self.backend_options)
        except ConfigError:
            raise
        except Exception as error:  # the real game is missing or misconfigured
            if params.backend == "tmi":
                raise ConfigError(f"the real-game backend is unavailable ({error}); on a machine without "
                                  f"TrackMania use {SIM_PRESET_HINT}") from None
            raise

    def preflight(self) -> None:
        """Refuse at once a run whose real game cannot start (settings or reference lines missing)."""
        if self.config.environment.backend != "tmi":
            return
        from environments.trackmania.tmi.settings import SettingsError, load_settings

        try:
            load_settings().require_for_launch()
        except SettingsError as error:
            raise ConfigError(f"the real-game backend is unavailable: {str(error).rstrip('.')}. On a machine without TrackMania "
                              f"use {SIM_PRESET_HINT}") from None
        for entry in self.cycle():
            if not Path(entry.reference_line_path).is_file():
                raise ConfigError(f"map_cycle entry '{entry.short_name}': reference line not found at "
                                  f"'{entry.reference_line_path}'. On a machine without TrackMania use {SIM_PRESET_HINT}")

    def env_for(self, entry: MapCycleEntry) -> gym.Env:
        key = _track_key(entry)
        if key not in self.envs:
            self.envs[key] = self.make_env(entry)
        return self.envs[key]

    def _first_map_env(self, _params: Any) -> gym.Env:
        return self.env_for(self.cycle()[0])

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["graph_manager"]["cycle_position"] = self.cycle_position
        state["graph_manager"]["best_race_time_s"] = dict(self.best_race_time_s)
        return state

    def load_checkpoint(self, path: str | Path) -> None:
        super().load_checkpoint(path)
        from rulka import checkpoints

        gm = checkpoints.load_checkpoint(path)["graph_manager"]
        self.cycle_position = int(gm["cycle_position"])
        self.best_race_time_s = {k: float(v) for k, v in gm["best_race_time_s"].items()}

    # ------------------------------------------------------------------ the loop
    def improve(self, max_env_steps: int | None = None, stop_at_evaluation: float | None = None,
                show_progress: bool = True) -> RunSummary:
        """Race map-cycle episodes until ``max_env_steps``.

        ``stop_at_evaluation`` (seconds) stops at the first greedy race that finishes within it.
        """
        agent = self.agent
        assert agent is not None, "call create() first"
        total = max_env_steps if max_env_steps is not None else self.config.training.max_env_steps
        progress = ProgressBar(total, enabled=show_progress)
        start = time.monotonic()
        self._clock = {"start": time.monotonic(), "train": 0.0, "steps": agent.counters.env_steps}
        reached = False
        cycle = self.cycle()
        while agent.counters.env_steps < total and not reached and not self.stop_requested:
            entry = cycle[self.cycle_position % len(cycle)]
            self.cycle_position += 1
            race = self.run_episode(entry, total, progress)
            if race is not None and stop_at_evaluation is not None and not race.exploration and race.finished:
                reached = race.race_time_s <= stop_at_evaluation
        return self.finish_run(progress, start, reached)

    def episode_phase(self, entry: MapCycleEntry) -> RunPhase:
        agent = self.agent
        if agent.counters.gradient_updates == 0 and not agent.can_learn():
            return RunPhase.HEATUP
        return RunPhase.TRAIN if entry.is_exploration else RunPhase.EVALUATE

    def run_episode(self, entry: MapCycleEntry, max_env_steps: int, progress: ProgressBar) -> RaceResult | None:
        """One race on ``entry``'s map; None if ``max_env_steps`` cut it short."""
        agent, level, training = self.agent, self.level, self.config.training
        level.env = self.env_for(entry)
        level.reset(seed=self.seed + self.cycle_position)
        phase = self.episode_phase(entry)
        frames = [level.observation["frame"][0]]
        overlays: list[tuple[float, int | None, int]] = [(0.0, None, 0)]
        actions: list[int] = []
        while True:
            result = level.step(phase, store=entry.fill_buffer)
            steps = agent.counters.env_steps
            actions.append(level.last_action)
            frames.append(result.next_observation["frame"][0])
            overlays.append((result.info.get("speed_kmh", 0.0), level.last_action, result.info.get("race_time_ms", 0)))
            if entry.fill_buffer and steps % training.train_every_n_env_steps == 0:
                self.train_and_log()
            if self.run_dir is not None and training.checkpoint_every_n_env_steps and entry.fill_buffer and \
                    steps % training.checkpoint_every_n_env_steps == 0:
                self.save_checkpoint()
            progress.update(phase.value, steps, self.last_evaluation)
            if result.done:
                break
            if steps >= max_env_steps:
                agent.abandon_episode()
                return None
        race = RaceResult(
            entry.short_name, phase is not RunPhase.EVALUATE, bool(result.info.get("finished", False)),
            result.info.get("race_time_ms", 0) / 1000.0, float(result.info.get("progress_fraction", 0.0)),
            level.episode_return, agent.counters.env_steps, time.monotonic() - self._clock["start"],
            str(result.info.get("end_reason", "")),
        )
        self.record_race(race, actions, frames, overlays)
        return race

    def train_and_log(self) -> None:
        agent = self.agent
        t0 = time.monotonic()
        updates_before = agent.counters.gradient_updates
        stats = agent.train()
        self._clock["train"] += time.monotonic() - t0
        if stats is None or agent.counters.gradient_updates // 100 == updates_before // 100:
            return
        now = time.monotonic()
        elapsed = max(now - self._clock.get("last_log", self._clock["start"]), 1e-9)
        sampled_since = agent.counters.transitions_sampled - self._clock.get("last_sampled", 0)
        self._clock.update(last_log=now, last_sampled=agent.counters.transitions_sampled)
        test_loss = getattr(agent, "test_loss", lambda: None)()
        if test_loss is not None:
            stats["test_loss"] = test_loss
        self.log_training(stats)
        self.log({"Performance/transitions_learned_per_s": sampled_since / elapsed,
                  "Performance/learner_training_fraction": self._clock["train"] / elapsed})
        self._clock["train"] = 0.0

    # ------------------------------------------------------------------ results
    def record_race(self, race: RaceResult, actions: list[int], frames: list, overlays: list) -> None:
        self.races.append(race)
        kind = "explo" if race.exploration else "eval"
        group = f"Race_{kind}/{race.map_name}"
        recent = [r.finished for r in self.races if r.map_name == race.map_name and r.exploration == race.exploration]
        values = {f"{group}/finished_ratio_last_{RATIO_WINDOW}": sum(recent[-RATIO_WINDOW:]) / len(recent[-RATIO_WINDOW:]),
                  f"{group}/progress": race.progress_fraction, f"{group}/return": race.episode_return}
        if race.finished:
            values[f"{group}/race_time_s"] = race.race_time_s
        if not race.exploration:
            self.last_evaluation = race.race_time_s if race.finished else None
        best = self.best_race_time_s.get(race.map_name)
        if race.finished and (best is None or race.race_time_s < best):
            self.best_race_time_s[race.map_name] = race.race_time_s
            self.save_best_run(race, actions, frames, overlays)
        if race.map_name in self.best_race_time_s:
            values[f"Race/{race.map_name}/best_race_time_s"] = self.best_race_time_s[race.map_name]
        self.log(values)
        if self.run_dir is not None:
            path = self.run_dir / "races.csv"
            new = not path.exists()
            with open(path, "a", encoding="utf-8") as f:
                if new:
                    f.write("wall_time_s,env_steps,map,exploration,finished,race_time_s,progress_fraction,return,end_reason\n")
                f.write(f"{race.wall_time_s:.1f},{race.env_steps},{race.map_name},{int(race.exploration)},"
                        f"{int(race.finished)},{race.race_time_s:.2f},{race.progress_fraction:.4f},{race.episode_return:.3f},"
                        f"{race.end_reason}\n")

    def save_best_run(self, race: RaceResult, actions: list[int], frames: list, overlays: list) -> None:
        if self.run_dir is None:
            return
        from environments.trackmania.tmi.inputs_export import export_inputs

        folder = self.run_dir / "best_runs" / race.map_name
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"{int(round(race.race_time_s * 1000))}ms_{race.env_steps}steps"
        (folder / f"{stem}.json").write_text(json.dumps(
            {"map": race.map_name, "race_time_s": race.race_time_s, "env_steps": race.env_steps,
             "exploration": race.exploration, "actions": actions}))
        export_inputs(folder / f"{stem}.inputs", actions)
        write_gif(frames, overlays, folder / f"{stem}.gif", self.config.environment.ms_per_action)

    def close(self) -> None:
        super().close()
        for env in self.envs.values():
            if self.level is None or env is not self.level.env:
                env.close()
