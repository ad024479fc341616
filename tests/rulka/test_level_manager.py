import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from filters import InputFilter, OutputFilter
from rulka.level_manager import LevelManager
from rulka.validation import NonFiniteDataError


class Broken(gym.Env):
    """Returns a NaN in its observation (or reward) at step 3."""

    observation_space = spaces.Dict({"observation": spaces.Box(-10, 10, (2,), np.float32)})
    action_space = spaces.Discrete(2)

    def __init__(self, where: str) -> None:
        self.where = where

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {"observation": np.zeros(2, np.float32)}, {}

    def step(self, action):
        self.t += 1
        obs = np.zeros(2, np.float32)
        reward = 0.0
        if self.t == 3:
            if self.where == "observation":
                obs[1] = np.nan
            else:
                reward = float("inf")
        return {"observation": obs}, reward, False, False, {}


@pytest.mark.reliability
@pytest.mark.parametrize("where", ["observation", "reward"])
def test_non_finite_steps_are_refused_naming_the_environment_and_step(where):
    """A NaN observation or infinite reward stops at the LevelManager with the env's name and step."""
    level = LevelManager(None, Broken(where), InputFilter(), OutputFilter())
    level.reset()
    level.apply(0)
    level.apply(1)
    with pytest.raises(NonFiniteDataError, match=r"environment Broken at step 3: (observation|reward)"):
        level.apply(0)
