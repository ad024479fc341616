"""InputFilter and OutputFilter: per-name observation filters, and action filters chained in order."""
import numpy as np
from gymnasium import spaces

from filters import ActionFilter, InputFilter, OutputFilter
from filters.observation_filters import ObservationTypeCastFilter


class _Shift(ActionFilter):
    """Adds ``k`` to a Discrete action; its agent space is one action smaller per step of ``k``."""

    def __init__(self, k: int) -> None:
        self.k = k

    def agent_space(self, env_space: spaces.Space) -> spaces.Space:
        return spaces.Discrete(env_space.n - self.k)

    def filter(self, action):
        return action + self.k


def test_observations_without_filters_pass_unchanged():
    """Only the named observations are filtered; the others keep their space and value."""
    f = InputFilter({"frame": [ObservationTypeCastFilter(np.float32)]})
    space = f.filter_space(spaces.Dict({"frame": spaces.Box(0, 255, (2,), np.uint8),
                                        "speed": spaces.Box(-1, 1, (1,), np.float64)}))
    assert space["frame"].dtype == np.float32 and space["speed"] == spaces.Box(-1, 1, (1,), np.float64)
    out = f.filter_observation({"frame": np.array([1, 2], np.uint8), "speed": np.array([0.5])})
    assert out["frame"].dtype == np.float32 and out["speed"][0] == 0.5


def test_output_filter_chains_spaces_from_the_environment_back():
    """The agent's action space is the environment's, mapped through the action filters from last to first;
    actions go through them first to last."""
    out = OutputFilter([_Shift(1), _Shift(2)])
    assert out.agent_action_space(spaces.Discrete(10)) == spaces.Discrete(7)
    assert out.filter(0) == 3
