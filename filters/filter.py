"""Filters transform what passes between an environment and an agent, and the spaces too.

An :class:`InputFilter` sits on the way in (observations, per observation name, and rewards), an
:class:`OutputFilter` on the way out (actions). Because each filter also maps the space, networks
are sized from the filtered observation space and the agent sees the filtered action space.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces


class ObservationFilter(abc.ABC):
    @abc.abstractmethod
    def filter_space(self, space: spaces.Box) -> spaces.Box:
        """The space of the filtered observation."""

    @abc.abstractmethod
    def filter(self, observation: np.ndarray) -> np.ndarray:
        ...


class RewardFilter(abc.ABC):
    @abc.abstractmethod
    def filter(self, reward: float) -> float:
        ...


class ActionFilter(abc.ABC):
    """Maps the agent's action to the environment's action."""

    @abc.abstractmethod
    def agent_space(self, env_space: spaces.Space) -> spaces.Space:
        """The action space the agent acts in, given the environment's."""

    @abc.abstractmethod
    def filter(self, action: Any) -> Any:
        ...


@dataclass
class InputFilter:
    """Observation filters per observation name (applied in order) and reward filters."""

    observation_filters: dict[str, list[ObservationFilter]] = field(default_factory=dict)
    reward_filters: list[RewardFilter] = field(default_factory=list)

    def filter_space(self, space: spaces.Dict) -> spaces.Dict:
        self._check_names(space)
        result = {}
        for name, sub_space in space.spaces.items():
            for f in self.observation_filters.get(name, []):
                sub_space = f.filter_space(sub_space)
            result[name] = sub_space
        return spaces.Dict(result)

    def filter_observation(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        result = dict(observation)
        for name, filters in self.observation_filters.items():
            value = result[name]
            for f in filters:
                value = f.filter(value)
            result[name] = value
        return result

    def filter_reward(self, reward: float) -> float:
        for f in self.reward_filters:
            reward = f.filter(reward)
        return float(reward)

    def _check_names(self, space: spaces.Dict) -> None:
        unknown = set(self.observation_filters) - set(space.spaces)
        if unknown:
            raise ValueError(
                f"observation filters name {sorted(unknown)}, but the observation has only {sorted(space.spaces)}"
            )


@dataclass
class OutputFilter:
    action_filters: list[ActionFilter] = field(default_factory=list)

    def agent_action_space(self, env_space: spaces.Space) -> spaces.Space:
        for f in reversed(self.action_filters):
            env_space = f.agent_space(env_space)
        return env_space

    def filter(self, action: Any) -> Any:
        for f in self.action_filters:
            action = f.filter(action)
        return action
