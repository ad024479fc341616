"""Always the action of highest Q."""
from __future__ import annotations

import numpy as np

from exploration_policies.exploration_policy import ExplorationPolicy
from rulka.core_types import RunPhase


class Greedy(ExplorationPolicy):
    def select(self, q_values: np.ndarray, step: float, phase: RunPhase) -> tuple[np.ndarray, np.ndarray]:
        return q_values.argmax(axis=1), np.ones(len(q_values), dtype=bool)
