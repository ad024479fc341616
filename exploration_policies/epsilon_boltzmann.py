"""Linesight's mix of epsilon-greedy and "epsilon-Boltzmann" (Gaussian noise on Q).

For each action: with probability epsilon a uniformly random action; otherwise, with probability
epsilon_boltzmann, ``argmax(Q + tau * N(0, 1))``; otherwise ``argmax(Q)``. An action counts as greedy when it equals ``argmax(Q)``, whichever
branch chose it: that is what matters to n-step returns.
"""
from __future__ import annotations

import numpy as np

from exploration_policies.epsilon_greedy import EpsilonGreedy
from rulka.core_types import RunPhase
from rulka.schedules import Schedule


class EpsilonBoltzmann(EpsilonGreedy):
    def __init__(self, num_actions: int, epsilon_schedule: Schedule, epsilon_boltzmann_schedule: Schedule,
                 tau_epsilon_boltzmann: float, evaluation_epsilon: float = 0.0, seed: int | None = None) -> None:
        super().__init__(num_actions, epsilon_schedule, evaluation_epsilon, seed)
        self.epsilon_boltzmann_schedule = epsilon_boltzmann_schedule
        self.tau = tau_epsilon_boltzmann

    def select(self, q_values: np.ndarray, step: float, phase: RunPhase) -> tuple[np.ndarray, np.ndarray]:
        count = len(q_values)
        greedy = q_values.argmax(axis=1)
        epsilon = self.epsilon(step, phase)
        boltzmann_p = 0.0 if phase is RunPhase.EVALUATE else float(self.epsilon_boltzmann_schedule.value(step))
        draw = self.rng.random(count)
        random_mask = draw < epsilon
        boltzmann_mask = ~random_mask & (self.rng.random(count) < boltzmann_p)
        noised = (q_values + self.tau * self.rng.standard_normal(q_values.shape)).argmax(axis=1)
        actions = np.where(random_mask, self.random_actions(count), np.where(boltzmann_mask, noised, greedy))
        return actions, actions == greedy

    def current_values(self, step: float) -> dict[str, float]:
        return {**super().current_values(step),
                "epsilon_boltzmann": float(self.epsilon_boltzmann_schedule.value(step))}
