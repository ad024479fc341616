"""The TrackMania graph manager: the core training loop with TrackMania's pieces plugged in.

What it adds to :class:`~rulka.graph_manager.BasicRLGraphManager`:

* environments: environment ``i`` is game instance ``i`` (port ``TMI_BASE_PORT + i``) or simulator
  instance ``i``; one backend per instance serves every map of the cycle;
* the map cycle (:mod:`environments.trackmania.training.map_cycle`) as each environment's episode plan;
* race logging (:mod:`environments.trackmania.training.race_log`): ``races.csv``, per-map values, best runs.
  The cycle's greedy races are the evaluation: ``stop_at_evaluation`` is a race time in seconds;
  ``last_evaluation`` is the last greedy race's time (None: it did not finish) and ``best_evaluation``
  the best greedy race time so far, both on the progress line and in the final summary.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from environments.trackmania.backend_registry import backend_may_discard_races
from environments.trackmania.env import TrackManiaEnv, trackmania_spaces
from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig
from environments.trackmania.training.map_cycle import cycle_entries, entry_track, map_cycle_plan
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.training.race_log import RACE_INFO_KEYS, RaceLog, RaceResult
from rulka.collection.episodes import EpisodeRecord
from rulka.config import ConfigError
from rulka.graph_manager import BasicRLGraphManager
from rulka.parameters import PresetValidationParameters

SIM_PRESET_HINT = "rulka -p trackmania_iqn_sim (the same agent on the built-in simulator)"
#: Seconds the collector watchdog must allow beyond the game's start deadline (connect, configure).
START_MARGIN_S = 60.0
#: Seconds the watchdog of collector processes must allow beyond one race step's own timeout.
STEP_MARGIN_S = 30.0


def check_collector_timeout(collector_timeout_s: float, start_timeout_s: float, collectors: int,
                            backend: str = "processes", step_timeout_s: float = 30.0) -> None:
    """Refuse a watchdog that may fire before the game itself gives up.

    Collector processes keep their heartbeat going while a game launches, loads a map and counts down;
    between two heartbeats they play one step, which the game bounds by its in-race timeout
    (``environment.timeout_during_run_ms``, ``step_timeout_s``): ``collector_timeout_s`` must exceed it
    by ``STEP_MARGIN_S``. A Ray actor reports only when a ``collect`` call returns, and a call may span
    a game's start (``TMI_START_TIMEOUT_S``, default 600 s): there it must exceed the start deadline by
    ``START_MARGIN_S``. In the learner's process (``collectors`` 0) there is no watchdog.

    Raises:
        ConfigError: ``collector_timeout_s`` too short, naming both fixes.
    """
    if collectors <= 0:
        return
    if backend == "ray":
        needed = float(start_timeout_s) + START_MARGIN_S
        if float(collector_timeout_s) < needed:
            raise ConfigError(
                f"performance.collector_timeout_s = {collector_timeout_s:g} s would kill a Ray collector whose game is "
                f"still starting (the game's start deadline is {start_timeout_s:g} s, TMI_START_TIMEOUT_S): set "
                f"performance.collector_timeout_s to at least {needed:g} (-cp performance.collector_timeout_s={needed:g})"
                + _or_lower("TMI_START_TIMEOUT_S", float(collector_timeout_s) - START_MARGIN_S, "TMI_START_TIMEOUT_S={:g}"))
        return
    needed = float(step_timeout_s) + STEP_MARGIN_S
    if float(collector_timeout_s) < needed:
        raise ConfigError(
            f"performance.collector_timeout_s = {collector_timeout_s:g} s would kill a collector whose game may still "
            f"answer one race step (environment.timeout_during_run_ms = {step_timeout_s * 1000:g} ms): set "
            f"performance.collector_timeout_s to at least {needed:g} (-cp performance.collector_timeout_s={needed:g})"
            + _or_lower("environment.timeout_during_run_ms", math.floor((float(collector_timeout_s) - STEP_MARGIN_S) * 1000),
                        "-cp environment.timeout_during_run_ms={:g}"))


def _or_lower(name: str, at_most: float, form: str) -> str:
    """The second fix of a watchdog refusal, lowering ``name`` to ``at_most``; empty when that is no
    possible value (both fields must be > 0: a watchdog under the margin leaves only the first fix)."""
    if at_most <= 0:
        return ""
    return f" or lower {name} to at most {at_most:g} ({form.format(at_most)})"


def greedy_race_line(reset_seed: int, info: dict[str, Any]) -> str:
    """A greedy race as ``rulka --evaluate`` prints it, from the environment's last ``info``: its reset
    seed, and its race time (ms, the game's unit) when it finished, else how far it got, when and why."""
    where = f"greedy race on {info.get('track', '?')} (reset seed {reset_seed})"
    if info.get("finished"):
        return f"{where}: finished in {int(info['race_time_ms'])} ms"
    return (f"{where}: not finished, {float(info.get('progress_fraction', 0.0)):.1%} of the track after "
            f"{int(info.get('race_time_ms', 0))} ms ({info.get('end_reason', 'unknown')})")


@dataclass
class TrackManiaEnvFactory:
    """Builds environment ``instance`` (picklable: collector processes call it).

    ``first_track``: the track it starts on (the map cycle then switches tracks through ``reset``);
    ``running_speed``: the real game's speed; ``backend_options``: more options for the backend.
    """

    first_track: Any
    running_speed: float = 1.0
    backend_options: dict[str, Any] = field(default_factory=dict)

    def __call__(self, params: TrackManiaEnvironmentParameters, instance: int = 0) -> gym.Env:
        options = dict(self.backend_options)
        if params.backend == "tmi":
            options.setdefault("instance_index", instance)
            options.setdefault("running_speed", self.running_speed)
        try:
            return TrackManiaEnv(params, track=self.first_track, backend=params.backend, backend_options=options)
        except ConfigError:
            raise
        except Exception as error:  # the real game is missing or misconfigured
            if params.backend == "tmi":
                raise ConfigError(f"the real-game backend is unavailable ({error}); on a machine without "
                                  f"TrackMania use {SIM_PRESET_HINT}") from None
            raise


class TrackManiaGraphManager(BasicRLGraphManager):
    """Args: as :class:`BasicRLGraphManager`; ``backend_options`` go to every environment's backend."""

    config: TrackManiaExperimentConfig
    info_keys = RACE_INFO_KEYS
    keeps_episode_steps = True
    evaluation_mode = "min"
    evaluation_name = "best greedy race time (s)"

    def __init__(self, agent_class: type, config: TrackManiaExperimentConfig,
                 preset_validation_params: PresetValidationParameters | None = None,
                 backend_options: dict[str, Any] | None = None) -> None:
        super().__init__(agent_class, config, preset_validation_params=preset_validation_params,
                         plan_factory=map_cycle_plan)
        self.backend_options = backend_options or {}
        self.race_log = RaceLog(None, self.log, config.environment.ms_per_action)

    @property
    def races(self) -> list[RaceResult]:
        return self.race_log.races

    @property
    def best_race_time_s(self) -> dict[str, float]:
        return self.race_log.best_race_time_s

    # ------------------------------------------------------------------ building
    def preflight(self) -> None:
        """Refuse at once a run whose real game cannot start (settings or reference lines missing)."""
        super().preflight()
        cycle_entries(self.config)
        if self.config.environment.backend != "tmi":
            return
        from environments.trackmania.tmi.games.settings import SettingsError, load_settings

        try:
            settings = load_settings()
            settings.require_for_launch()
        except SettingsError as error:
            raise ConfigError(f"the real-game backend is unavailable: {str(error).rstrip('.')}. On a machine without TrackMania "
                              f"use {SIM_PRESET_HINT}") from None
        for entry in cycle_entries(self.config):
            if not Path(entry.reference_line_path).is_file():
                raise ConfigError(f"map_cycle entry '{entry.short_name}': reference line not found at "
                                  f"'{entry.reference_line_path}'. On a machine without TrackMania use {SIM_PRESET_HINT}")
        if self.config.environment.sync_virtual_and_real_checkpoints:
            from environments.trackmania.tmi.maps.map_checkpoints import check_map_checkpoints

            for entry in cycle_entries(self.config):
                problem = check_map_checkpoints(entry.map_path, settings.user_data_path)
                if problem:
                    raise ConfigError(f"map_cycle entry '{entry.short_name}': {problem}")
        from environments.trackmania.tmi.games.game_instance_manager import DEFAULT_START_TIMEOUT_S, check_running_speed

        check_collector_timeout(self.config.performance.collector_timeout_s,
                                settings.start_timeout_s or DEFAULT_START_TIMEOUT_S,
                                self.config.performance.gpu_collectors_count,
                                self.config.performance.collector_backend,
                                self.config.environment.timeout_during_run_ms / 1000.0)

        check_running_speed(self.config.performance.running_speed)  # warns now, before any game starts

    def create(self, run_dir: str | Path | None, device: Any = "cpu", seed: int = 0,
               resume: bool = False) -> "TrackManiaGraphManager":
        first = cycle_entries(self.config)[0]
        self.env_factory = TrackManiaEnvFactory(entry_track(first, self.config.environment.backend),
                                                float(self.config.performance.running_speed), self.backend_options)
        super().create(run_dir, device, seed, resume)
        self.race_log.run_dir = self.run_dir
        self.race_log.enable_pictures(self.config.environment, self.seed, self.backend_options)
        return self

    def environment_spaces(self) -> tuple[spaces.Dict, spaces.Space]:
        """From the parameters alone: no game is started until a collector needs one."""
        if self.config.performance.gpu_collectors_count <= 0:
            return super().environment_spaces()
        return trackmania_spaces(self.config.environment)

    def episodes_may_be_discarded(self) -> bool:
        """The backend's say (the real game's races may be lost: a game that hangs or dies), known with no game built."""
        return backend_may_discard_races(self.config.environment.backend)

    # ------------------------------------------------------------------ races
    def episode_ended(self, record: EpisodeRecord) -> None:
        race = self.race_log.record(record, self.agent.counters.env_steps, time.monotonic() - self.created_at_monotonic)
        if not race.exploration:
            self.last_evaluation = race.race_time_s if race.finished else None
            if race.finished and (self.best_evaluation is None or race.race_time_s < self.best_evaluation):
                self.best_evaluation = race.race_time_s  # a race time: lower is better
            stop_at = self.stop_at_evaluation
            if stop_at is not None and race.finished and race.race_time_s <= stop_at:
                self.reached = True
            self.evaluation_done()

    def describe_evaluation(self) -> list[str]:
        """One line per greedy race of the last :meth:`evaluate` (:func:`greedy_race_line`)."""
        return [greedy_race_line(seed, rollout.final_info or {}) for seed, rollout in self.last_evaluation_episodes]

    @property
    def created_at_monotonic(self) -> float:
        return time.monotonic() - (time.time() - self.created_at)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["graph_manager"]["best_race_time_s"] = dict(self.race_log.best_race_time_s)
        return state

    def load_checkpoint(self, path: str | Path) -> dict[str, Any]:
        state = super().load_checkpoint(path)
        self.race_log.load_state_dict(state["graph_manager"])
        return state

