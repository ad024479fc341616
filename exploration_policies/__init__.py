"""Exploration policies: how an agent turns Q-values into actions while training."""
from exploration_policies.epsilon_boltzmann import EpsilonBoltzmann
from exploration_policies.epsilon_greedy import EpsilonGreedy
from exploration_policies.exploration_policy import ExplorationPolicy
from exploration_policies.greedy import Greedy

__all__ = ["EpsilonBoltzmann", "EpsilonGreedy", "ExplorationPolicy", "Greedy"]
