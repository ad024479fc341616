"""What a collector sends the learner: consecutive steps of one environment's episode."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rulka.core_types import Observation, RunPhase


@dataclass(frozen=True)
class EpisodeSpec:
    """What one episode is, as an :class:`EpisodePlan` decides it before the reset.

    ``reset_options`` go to ``env.reset(options=...)`` (e.g. the track of a map cycle entry);
    ``explore``: act with the exploration policy (else greedily); ``store``: its transitions go to
    the replay memory and count as training steps; ``tag``: a name for logs (the map's name).
    """

    reset_options: dict[str, Any] | None = None
    #: Seed of the reset (None: derived from the run's seed, the environment and the episode number).
    seed: int | None = None
    explore: bool = True
    store: bool = True
    tag: str = ""


class EpisodePlan:
    """Chooses each episode of one environment. The default: explore and store, always."""

    def next_episode(self) -> EpisodeSpec:
        return EpisodeSpec()

    def advance(self, episodes: int) -> None:
        """Skip ``episodes`` episodes, as if they had been played (a replaced or resumed collector
        continues its environment's plan where the previous one stopped)."""
        for _ in range(episodes):
            self.next_episode()


@dataclass
class Rollout:
    """``T`` consecutive steps of one episode of one environment (a whole episode or a chunk).

    Shapes: ``states`` maps names to (T + 1, ...) arrays of filtered observations, ``states[t + 1]``
    following ``actions[t]``; ``actions`` (T,) int64; ``was_greedy`` (T,) bool; ``rewards`` (T,)
    float32 after the reward filters; ``step_info`` maps the info keys a graph manager asked for to
    (T,) arrays. ``terminated`` / ``truncated`` describe the last step; a chunk that ends
    mid-episode has both false. ``continues`` says that the next chunk of this episode follows
    before any other environment's steps (one environment in the learner's process), so the
    chunk's end need not be cut; otherwise the learner stores a mid-episode end as a cut that
    bootstraps from ``states[T]``.
    """

    source: tuple[int, int, int]  # (collector id, incarnation, environment index)
    episode: int  # episode number of this environment slot
    spec: EpisodeSpec
    phase: RunPhase
    states: Observation
    actions: np.ndarray
    was_greedy: np.ndarray
    rewards: np.ndarray
    step_info: dict[str, np.ndarray] = field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False
    #: The environment lost the episode (``info["discarded"]``): the last steps never happened.
    discarded: bool = False
    continues: bool = False
    #: Gradient updates of the weights that chose the first action of the chunk.
    policy_updates: int = 0
    #: (T,) int64: gradient updates of the weights that chose each action (they may change mid-chunk).
    step_policy_updates: np.ndarray | None = None
    #: (T,) float64: ``time.time()`` at which each action was chosen (the learner turns it into its
    #: gradient-update count then, for the policy lag and queue delay).
    step_times: np.ndarray | None = None
    #: Some action of the episode so far was played in heatup (at random, whatever the plan said).
    played_in_heatup: bool = False
    #: Return (environment rewards, before filters) and length of the episode so far.
    episode_return: float = 0.0
    episode_length: int = 0
    #: The environment's info of the last step when the episode ended, else None.
    final_info: dict[str, Any] | None = None

    @property
    def length(self) -> int:
        return int(self.actions.shape[0])

    @property
    def episode_ended(self) -> bool:
        return self.terminated or self.truncated or self.discarded

    @property
    def stream(self) -> tuple[tuple[int, int, int], int]:
        """Identifies the episode this chunk belongs to."""
        return self.source, self.episode
