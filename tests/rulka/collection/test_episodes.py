import gymnasium as gym
import numpy as np
from gymnasium import spaces

from agents.iqn_agent import IQNAgent
from filters import InputFilter, OutputFilter
from rulka.collection.collector import Collector
from rulka.collection.episodes import store_rollout
from rulka.collection.rollout import EpisodePlan
from rulka.level_manager import LevelManager
from rulka.parameters import ExperimentConfig, MemoryParameters, NeuralNetworkParameters, TrainingParameters
from rulka.schedules import Schedule


class LostGame(gym.Env):
    """Three steps, then the 'game' is lost: truncated with info['discarded'] = True."""

    observation_space = spaces.Dict({"observation": spaces.Box(-10, 10, (1,), np.float32)})
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return {"observation": np.zeros(1, np.float32)}, {}

    def step(self, action):
        self.t += 1
        lost = self.t == 4
        return {"observation": np.full(1, self.t, np.float32)}, 1.0, False, lost, {"discarded": lost}


def test_discarded_rollout_is_not_stored_as_a_transition():
    """A lost rollout stores no fake last step, closes no n-step window through it, counts no episode."""
    config = ExperimentConfig(
        neural_network=NeuralNetworkParameters(vector_embedder_hidden_sizes=[8], dense_hidden_dimension=8, iqn_n=2, iqn_k=2),
        training=TrainingParameters(n_steps=3, batch_size=4),
        memory=MemoryParameters(memory_size_schedule=Schedule([(0, (100, 50))], "staircase")),
    )
    env = LostGame()
    agent = IQNAgent(config, env.observation_space, env.action_space, "cpu", seed=0)
    collector = Collector(agent, [LevelManager(agent, env, InputFilter(), OutputFilter())], [EpisodePlan()],
                          continues=True, chunk_actions=1)
    rollouts = []
    while not any(r.episode_ended for r in rollouts):
        rollouts += collector.step(heatup=False)
    for rollout in rollouts:
        store_rollout(agent, rollout)
    assert rollouts[-1].discarded and rollouts[-1].length == 0
    assert agent.memory.transitions_added == 3
    assert len(agent.memory) == 0  # every window ran into the lost step: none was completed
    assert agent.counters.episodes == 0
