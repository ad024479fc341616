"""Any gymnasium environment, with its observation presented as a dict of named arrays."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rulka.parameters import GymEnvironmentParameters

OBSERVATION_KEY = "observation"


class DictObservation(gym.ObservationWrapper):
    """Wraps a non-Dict observation as ``{"observation": obs}`` so every agent sees named inputs."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        if isinstance(env.observation_space, spaces.Dict):
            self.observation_space = env.observation_space
            self._wrap = False
        else:
            if not isinstance(env.observation_space, spaces.Box):
                raise ValueError(f"observations must be a Box or a Dict of Boxes, got {env.observation_space}")
            self.observation_space = spaces.Dict({OBSERVATION_KEY: env.observation_space})
            self._wrap = True

    def observation(self, observation: Any) -> dict[str, np.ndarray]:
        return {OBSERVATION_KEY: observation} if self._wrap else observation


def make_gym_environment(params: GymEnvironmentParameters) -> gym.Env:
    """``gymnasium.make(params.level, **params.kwargs)`` with dict observations."""
    try:
        env = gym.make(params.level, max_episode_steps=params.max_episode_steps, **params.kwargs)
    except gym.error.Error as error:
        raise ValueError(f"cannot make gymnasium environment '{params.level}': {error}") from None
    return DictObservation(env)
