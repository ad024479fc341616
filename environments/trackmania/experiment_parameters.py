"""The typed configuration of a TrackMania experiment, laid out as the configuration guide's YAML.

A YAML written for the guide loads unchanged: its ``rewards`` and ``state_normalization``
sections and ``neural_network.W_downsized`` / ``H_downsized`` are routed to the environment
parameters, which own them (the environment computes rewards and frames).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from environments.trackmania.layout import FloatLayout
from environments.trackmania.normalization import normalization_from_parameters
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from memories.shaping import DistancePotential
from rulka.parameters import (ExperimentConfig, MemoryParameters, NeuralNetworkParameters, PerformanceParameters,
                              TrainingParameters)


@dataclass
class MapCycleEntry:
    """One entry of the TrackMania map cycle."""

    short_name: str = "map"
    #: The map: a built-in or procedural track name or a line ``.npy`` (simulator), a ``.Challenge.Gbx`` (game).
    map_path: str = ""
    #: The reference line ``.npy`` of the map (the real game needs it; the simulator can take it as the track).
    reference_line_path: str = ""
    #: Race with the exploration policy (else greedily: the map's evaluation).
    is_exploration: bool = True
    #: Store this race's transitions in the replay memory.
    fill_buffer: bool = True
    #: Consecutive races of this entry per cycle.
    repeat: int = 1


@dataclass
class MapCycleParameters:
    """The ``map_cycle`` section: which track each race runs and whether it explores.

    Each environment (game instance) races the cycle on its own, from its own position in it.
    """

    entries: list[MapCycleEntry] = field(default_factory=list)


@dataclass
class TrackManiaPerformanceParameters(PerformanceParameters):
    #: Game instances, one per collector process (the guide's default).
    gpu_collectors_count: int = 4


@dataclass
class TrackManiaNeuralNetworkParameters(NeuralNetworkParameters):
    """Linesight's network: conv image head, float head, cosine quantile embedding, dueling heads."""

    #: Width of the two layers of the float head.
    float_hidden_dim: int = 256
    #: Hidden width of the dueling advantage and value heads (Linesight: 512).
    dense_hidden_dimension: int = 512


@dataclass
class TrackManiaTrainingParameters(TrainingParameters):
    """Training section with the mini-race sampling parameters."""

    run_name: str = "uni"
    #: Clock draw range starts at -oversample_long_term_steps + oversample_maximum_term_steps.
    oversample_long_term_steps: int = 40
    #: Shift after abs() and extra width of the clock draw range.
    oversample_maximum_term_steps: int = 5
    #: PER priorities are only updated for samples whose mini-race clock is below this, actions
    #: (None: temporal_mini_race_duration_actions - 40).
    min_horizon_to_update_priority_actions: Optional[int] = None
    #: Linesight's loss scaling: each sample's loss is multiplied by typical_clamped_self_loss /
    #: clamped spread, the spread (sqrt of the target's self loss) clamped below at
    #: typical_self_loss / this ratio (both running means, initial 0.01). 0 disables the scaling.
    target_self_loss_clamp_ratio: float = 4.0
    #: The map cycle's greedy entries are the evaluation; no separate evaluation episodes.
    evaluate_every_n_env_steps: int = 0
    checkpoint_every_n_env_steps: int = 50_000
    max_env_steps: int = 50_000_000


@dataclass
class TrackManiaMemoryParameters(MemoryParameters):
    buffer_test_ratio: float = 0.05
    #: Frames make the memory large (about 1 GB at 50k transitions): not saved by default; a
    #: resumed run refills it with its current policy before learning again.
    save_memory_in_checkpoint: bool = False


@dataclass
class TrackManiaExperimentConfig(ExperimentConfig):
    environment: TrackManiaEnvironmentParameters = field(default_factory=TrackManiaEnvironmentParameters)
    neural_network: TrackManiaNeuralNetworkParameters = field(default_factory=TrackManiaNeuralNetworkParameters)
    training: TrackManiaTrainingParameters = field(default_factory=TrackManiaTrainingParameters)
    memory: TrackManiaMemoryParameters = field(default_factory=TrackManiaMemoryParameters)
    performance: TrackManiaPerformanceParameters = field(default_factory=TrackManiaPerformanceParameters)
    map_cycle: MapCycleParameters = field(default_factory=lambda: MapCycleParameters([
        MapCycleEntry("short", "short", "", True, True, 4), MapCycleEntry("short", "short", "", False, True, 1)]))

    yaml_routes = {
        "rewards": "environment",
        "state_normalization": "environment",
        "neural_network.W_downsized": "environment.W_downsized",
        "neural_network.H_downsized": "environment.H_downsized",
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
