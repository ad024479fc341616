"""The exploration policy interface: from Q-values to actions, batched over environments."""
from __future__ import annotations

import abc

import numpy as np

from rulka.core_types import RunPhase


class ExplorationPolicy(abc.ABC):
    """Chooses actions from Q-values. ``q_values`` is (E, A) for E environments and A actions.

    Returns ``(actions, was_greedy)``, both of shape (E,). ``step`` is the value of the counter
    that drives the policy's schedules (already multiplied by ``global_schedule_speed``).
    """

    def __init__(self, num_actions: int, seed: int | None = None) -> None:
        self.num_actions = num_actions
        self.rng = np.random.default_rng(seed)

    @abc.abstractmethod
    def select(self, q_values: np.ndarray, step: float, phase: RunPhase) -> tuple[np.ndarray, np.ndarray]:
        ...

    def random_actions(self, count: int) -> np.ndarray:
        return self.rng.integers(0, self.num_actions, size=count)

    def current_values(self, step: float) -> dict[str, float]:
        """The values of the policy's schedules at ``step``, for logging."""
        return {}
