"""Epsilon-greedy: a uniformly random action with probability epsilon, else the greedy one."""
from __future__ import annotations

import numpy as np

from exploration_policies.exploration_policy import ExplorationPolicy
from rulka.core_types import RunPhase
from rulka.schedules import Schedule


class EpsilonGreedy(ExplorationPolicy):
    """``epsilon_schedule`` drives training; evaluation uses ``evaluation_epsilon``."""

    def __init__(self, num_actions: int, epsilon_schedule: Schedule, evaluation_epsilon: float = 0.0,
                 seed: int | None = None) -> None:
        super().__init__(num_actions, seed)
        self.epsilon_schedule = epsilon_schedule
        self.evaluation_epsilon = evaluation_epsilon

    def epsilon(self, step: float, phase: RunPhase) -> float:
        if phase is RunPhase.HEATUP:
            return 1.0
        if phase is RunPhase.EVALUATE:
            return self.evaluation_epsilon
        return float(self.epsilon_schedule.value(step))

    def select(self, q_values: np.ndarray, step: float, phase: RunPhase) -> tuple[np.ndarray, np.ndarray]:
        count = len(q_values)
        explore = self.rng.random(count) < self.epsilon(step, phase)
        greedy = q_values.argmax(axis=1)
        actions = np.where(explore, self.random_actions(count), greedy)
        return actions, actions == greedy

    def current_values(self, step: float) -> dict[str, float]:
        return {"epsilon": float(self.epsilon_schedule.value(step))}
