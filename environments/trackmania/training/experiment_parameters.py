"""The typed configuration of a TrackMania experiment, laid out as the configuration guide's YAML.

A YAML written for the guide loads unchanged: its ``rewards`` and ``state_normalization``
sections and ``neural_network.W_downsized`` / ``H_downsized`` are routed to the environment
parameters, which own them (the environment computes rewards and frames).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from environments.trackmania.layout import FloatLayout
from environments.trackmania.training.normalization import normalization_from_parameters
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from memories.shaping import DistancePotential
from rulka.parameters import (ExperimentConfig, MemoryParameters, NeuralNetworkParameters, PerformanceParameters,
                              TrainingParameters)
from rulka.rules import (BOOL, NON_EMPTY_STR, NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE_INT, STR, Rule, optional,
                         param)
from rulka.validation import config_problems

#: The map cycle's list itself; each entry's fields have their own rules, and the configuration checks
#: that at least one entry races and, for the simulator, that every track is known.
_MAP_CYCLE_ENTRIES = Rule("a list of map-cycle entries", lambda v: isinstance(v, list))


@dataclass
class MapCycleEntry:
    """One entry of the TrackMania map cycle."""

    short_name: str = param("map", NON_EMPTY_STR)
    """Name of the map in logs, TensorBoard and ``races.csv`` (e.g. ``hock``, ``A01``)."""
    map_path: str = param("", STR)
    """The map to race: for the simulator a built-in or procedural track name or a reference line
    ``.npy``; for the real game a ``.Challenge.Gbx`` file (as the game finds it)."""
    reference_line_path: str = param("", STR)
    """The map's reference line, an (N, 3) ``.npy`` of points about 0.5 m apart along the road
    (progress, rewards and the points ahead are measured on it). The real game needs it; the
    simulator may use it as the track."""
    is_exploration: bool = param(True, BOOL)
    """Race with the exploration policy (epsilon schedules); false races greedily: the map's
    evaluation race."""
    fill_buffer: bool = param(True, BOOL)
    """Store this race's transitions in the replay memory; false races without feeding the
    learner (e.g. an evaluation kept out of the data)."""
    repeat: int = param(1, NON_NEGATIVE_INT)
    """Consecutive races of this entry in each pass through the cycle; 0 skips it. The guide's
    pattern is 4 exploration races then 1 greedy race per map.

    Unit: races | Range: 0-10
    """


@dataclass
class MapCycleParameters:
    """The ``map_cycle`` section: which track each race runs and whether it explores.

    Each environment (game instance) races the cycle on its own, from its own position in it.
    """

    entries: list[MapCycleEntry] = param(rule=_MAP_CYCLE_ENTRIES, default_factory=list)
    """The cycle, raced in order and then again; each entry is a map with its reference line, its
    mode (exploration or greedy), whether it feeds the memory, and how many races in a row. Several
    maps in a cycle train one agent on all of them. In YAML: a list of mappings with the keys below."""


@dataclass
class TrackManiaPerformanceParameters(PerformanceParameters):
    """The ``performance`` section with the guide's default of four game instances."""

    gpu_collectors_count: int = 4


@dataclass
class TrackManiaNeuralNetworkParameters(NeuralNetworkParameters):
    """Linesight's network: conv image head, float head, cosine quantile embedding, dueling heads."""

    float_hidden_dim: int = param(256, POSITIVE_INT)
    """Width of the two layers of the float head, the MLP that embeds the float observation before
    it joins the image features. Wider adds capacity and cost; the simulator preset uses 128 to
    train on a CPU.

    Unit: units | Range: 128-512 | See: environment.float_input_dim, neural_network.dense_hidden_dimension
    """
    dense_hidden_dimension: int = 512


@dataclass
class TrackManiaTrainingParameters(TrainingParameters):
    """Training section with the mini-race sampling parameters."""

    run_name: str = "uni"
    oversample_long_term_steps: int = param(40, NON_NEGATIVE_INT)
    """Makes early mini-race clock times (many actions left) more likely. The clock of each sampled
    transition is drawn in ``[-oversample_long_term_steps + oversample_maximum_term_steps,
    horizon + oversample_maximum_term_steps)``, folded by abs(), shifted down by
    ``oversample_maximum_term_steps`` and clipped at 0: at the defaults the times 1-35 are drawn
    about twice as often as the others. Long-horizon samples carry most of the value to learn.

    Unit: actions | Range: 20-60 | See: training.oversample_maximum_term_steps, environment.temporal_mini_race_duration_actions
    """
    oversample_maximum_term_steps: int = param(5, NON_NEGATIVE_INT)
    """Shift after abs() and extra width of the clock draw above (see ``oversample_long_term_steps``):
    it keeps the last clock times of the mini-race reachable after the shift and makes clock 0 a
    little more likely (the clipped values).

    Unit: actions | Range: 1-10 | See: training.oversample_long_term_steps
    """
    min_horizon_to_update_priority_actions: Optional[int] = param(None, optional(NON_NEGATIVE_INT))
    """With prioritised replay, a sample's priority is updated only when its mini-race clock is below
    this: samples close to the mini-race end have small, noisy targets that would mislead the
    priorities. None computes it as ``temporal_mini_race_duration_actions - 40`` (at least 40 actions
    left). No effect while ``prio_alpha`` is 0.

    Unit: actions | Range: None, or 60%-90% of the mini-race | See: memory.prio_alpha, environment.temporal_mini_race_duration_actions
    """
    target_self_loss_clamp_ratio: float = param(4.0, NON_NEGATIVE)
    """Linesight's per-sample loss scaling: each sample's loss is multiplied by
    ``typical_clamped_spread / clamped spread``, where the spread is the square root of the target
    distribution's loss against itself, clamped below at ``typical_spread / ratio`` (both typical
    values are running means, starting at 0.01). Samples with wide return distributions then weigh
    less. 0 disables the scaling.

    Unit: ratio | Range: 0 (off), 2-8 | See: neural_network.iqn_kappa, neural_network.clip_grad_norm
    """
    evaluate_every_n_env_steps: int = 0
    checkpoint_every_n_env_steps: int = 50_000
    max_env_steps: int = 50_000_000


@dataclass
class TrackManiaMemoryParameters(MemoryParameters):
    """The ``memory`` section with a held-out test buffer and frames kept out of checkpoints."""

    buffer_test_ratio: float = 0.05
    save_memory_in_checkpoint: bool = False


_GENERIC_REWARDS_NOTE = ("TrackMania's rewards are the environment's (constant_reward_per_ms, "
                         "reward_per_m_advanced_along_centerline); this generic reward filter stays at its default.")


@dataclass
class TrackManiaExperimentConfig(ExperimentConfig):
    environment: TrackManiaEnvironmentParameters = field(default_factory=TrackManiaEnvironmentParameters)
    neural_network: TrackManiaNeuralNetworkParameters = field(default_factory=TrackManiaNeuralNetworkParameters)
    training: TrackManiaTrainingParameters = field(default_factory=TrackManiaTrainingParameters)
    memory: TrackManiaMemoryParameters = field(default_factory=TrackManiaMemoryParameters)
    performance: TrackManiaPerformanceParameters = field(default_factory=TrackManiaPerformanceParameters)
    map_cycle: MapCycleParameters = field(default_factory=lambda: MapCycleParameters([
        MapCycleEntry("short", "short", "", True, True, 4), MapCycleEntry("short", "short", "", False, True, 1)]))

    yaml_routes = {  # the guide's keys that live in the environment section
        "rewards": "environment",
        "state_normalization": "environment",
        "neural_network.W_downsized": "environment.W_downsized",
        "neural_network.H_downsized": "environment.H_downsized",
    }

    def validation_problems(self) -> list[str]:
        """Checks across sections (full key paths): the core's, then the map cycle's: at least one
        race, and for the simulator every track name known and every reference line file valid (the
        real game's files are checked by the graph manager's preflight, which explains how to run
        without the game)."""
        return super().validation_problems() + self._map_cycle_problems()

    def _map_cycle_problems(self) -> list[str]:
        environment, entries = self.environment, getattr(self.map_cycle, "entries", None)
        if not isinstance(environment, TrackManiaEnvironmentParameters) or not isinstance(entries, list):
            return []
        if dataclasses.is_dataclass(self.map_cycle) and config_problems(self.map_cycle, "map_cycle"):
            return []  # an entry's own field is wrong (already reported): its tracks cannot be looked up
        if not any(getattr(e, "repeat", 0) > 0 for e in entries):
            return ["map_cycle.entries: must hold at least one entry with repeat >= 1 (a map to race on)"]
        problems = []
        for i, entry in enumerate(entries):
            key = f"map_cycle.entries[{i}]"
            line_path = getattr(entry, "reference_line_path", "")
            if line_path and (environment.backend == "sim" or Path(line_path).is_file()):
                problems.extend(_track_problem(f"{key}.reference_line_path", line_path))
            elif environment.backend == "sim":
                problems.extend(_track_problem(f"{key}.map_path", getattr(entry, "map_path", "")))
        return problems

    def parameter_notes(self) -> dict[str, str]:
        """Why TrackMania's defaults differ from the core's, and values computed from other
        sections, shown by ``rulka params`` (documentation only)."""
        horizon = self.environment.temporal_mini_race_duration_actions
        return {
            "performance.gpu_collectors_count": "TrackMania's default is the guide's four game instances.",
            "neural_network.vector_embedder_hidden_sizes": (
                "Unused by TrackMania's network: its floats go through the float head (float_hidden_dim)."),
            "neural_network.dense_hidden_dimension": (
                "Linesight's config.py and the guide say 1024, but Linesight's dueling heads are "
                "dense_hidden_dimension // 2 = 512 wide; here the field is the head width itself, so 512 "
                "builds Linesight's network (its 6,578,333 parameters)."),
            "training.evaluate_every_n_env_steps": (
                "Off by default for TrackMania: the map cycle's greedy entries (is_exploration: false) are "
                "the evaluation."),
            "training.min_horizon_to_update_priority_actions": (
                f"In effect here: {self.min_horizon_to_update_priority_actions} actions "
                f"(mini-race horizon {horizon} actions)."),
            "memory.buffer_test_ratio": "TrackMania keeps 5 % of its races out of training, as Linesight.",
            "memory.save_memory_in_checkpoint": (
                "Off by default for TrackMania: frames make the memory large (about 1 GB per 50k transitions "
                "at 160 x 120); a resumed run refills it with its current policy before learning again."),
            "rewards.reward_scale": _GENERIC_REWARDS_NOTE,
            "rewards.reward_clip": _GENERIC_REWARDS_NOTE,
        }

    # What the TrackMania agent needs to know about the environment, read by name (agents/ imports
    # nothing from environments/).
    @property
    def min_horizon_to_update_priority_actions(self) -> int:
        """Samples whose mini-race clock is below this may have their priority updated, actions."""
        value = self.training.min_horizon_to_update_priority_actions
        return self.environment.temporal_mini_race_duration_actions - 40 if value is None else value

    @property
    def float_normalization(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std), float32 arrays (F,): the network sees ``(floats - mean) / std``."""
        return normalization_from_parameters(self.environment)

    @property
    def mini_race_clock_index(self) -> int:
        """Index of the mini-race clock in the ``floats`` observation."""
        return FloatLayout.from_parameters(self.environment).mini_race_clock.start

    @property
    def mini_race_horizon(self) -> int:
        """Mini-race length, actions (``temporal_mini_race_duration_actions``)."""
        return self.environment.temporal_mini_race_duration_actions

    @property
    def shaping_potential(self) -> DistancePotential | None:
        """Linesight's shaping potential, read from the stored floats (None when shaping is off).

        ``phi = shaped_reward_dist_to_cur_vcp * clip(distance to the current reference point,
        shaped_reward_min_dist_to_cur_vcp, shaped_reward_max_dist_to_cur_vcp)``; the distance is the
        norm of the first point of the layout's ``zone_centers`` group (the current point, in the
        car's frame, metres), the same value the environment reports as ``info["shaping_potential"]``.
        """
        env = self.environment
        if not env.shaped_reward_dist_to_cur_vcp:
            return None
        layout = FloatLayout.from_parameters(env)
        if layout.n_zone_centers < 1:
            raise ValueError("reward shaping needs the current reference point in the floats: "
                             "set environment.n_zone_centers_in_inputs >= 1 or shaped_reward_dist_to_cur_vcp: 0")
        start = layout.zone_centers.start
        return DistancePotential("floats", start, start + 3, env.shaped_reward_dist_to_cur_vcp,
                                 env.shaped_reward_min_dist_to_cur_vcp, env.shaped_reward_max_dist_to_cur_vcp)


def _track_problem(key: str, name: str) -> list[str]:
    """The error of a simulator track name or reference line file, as a configuration problem."""
    from environments.trackmania.track import TrackFileError  # the track modules load on first check
    from environments.trackmania.tracks import check_track_name

    try:
        check_track_name(name)
    except TrackFileError as error:
        return [f"{key}: {error}"]
    return []
