"""Small typed records passed between the graph manager, level manager, agents and memories."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

#: An observation after the input filter: always a dict of named arrays (a plain ``Box``
#: observation is wrapped under the key ``"observation"``).
Observation = dict[str, np.ndarray]


class RunPhase(enum.Enum):
    HEATUP = "heatup"
    TRAIN = "train"
    EVALUATE = "evaluate"


@dataclass
class Counters:
    """The run's counters. Each has one meaning and they are never mixed.

    ``env_steps`` counts actions sent to training environments (heatup included, evaluation
    excluded); ``episodes`` counts finished training episodes; ``gradient_updates`` counts
    optimizer steps; ``transitions_sampled`` counts transitions drawn from memory for learning.
    """

    env_steps: int = 0
    episodes: int = 0
    gradient_updates: int = 0
    transitions_sampled: int = 0

    def get(self, name: str) -> int:
        return int(getattr(self, name))

    def to_dict(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.__dict__.items()}


@dataclass
class ActionInfo:
    """What the agent decided for each environment of a batch.

    Shapes: ``actions`` (E,) int64, ``was_greedy`` (E,) bool, ``q_values`` (E, A) float32 or None.
    """

    actions: np.ndarray
    was_greedy: np.ndarray
    q_values: np.ndarray | None = None


@dataclass
class EnvResponse:
    """One environment step as the agent sees it (after the input filter)."""

    next_observation: Observation
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


@dataclass
class TransitionBatch:
    """A batch sampled for learning, on the learner's device: the only type a replay's ``sample`` returns.

    Shapes (B = batch size): ``states`` / ``next_states`` map names to (B, ...) tensors;
    ``actions`` (B,) int64; ``returns`` (B,) float32, the discounted sum of the n-step rewards
    (plus the shaping terms when the memory shapes); ``discounts`` (B,) float32, the factor of the
    bootstrap value (gamma ** k, 0 when the transition is terminal); ``weights`` (B,) float32
    importance weights (1 when uniform). For the memory only (numpy, on the CPU): ``indices`` (B,)
    int64 slots, ``steps_used`` (B,) int64 window lengths, and ``priority_mask`` (B,) bool, the
    samples whose priority may be updated (None: all).
    """

    states: dict[str, torch.Tensor]
    actions: torch.Tensor
    returns: torch.Tensor
    discounts: torch.Tensor
    next_states: dict[str, torch.Tensor]
    weights: torch.Tensor
    indices: np.ndarray
    steps_used: np.ndarray | None = None
    priority_mask: np.ndarray | None = None

    @property
    def size(self) -> int:
        return int(self.actions.shape[0])
