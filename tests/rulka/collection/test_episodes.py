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


class SometimesLost(gym.Env):
    """Races of 12 steps; every third is lost at step 9 (truncated, ``info["discarded"]``). ``metadata`` says
    whether it admits it (``may_discard_episodes``). Every race played is written down in ``played``."""

    observation_space = spaces.Dict({"observation": spaces.Box(-100, 100, (1,), np.float32)})
    action_space = spaces.Discrete(2)
    played: list[tuple[int, bool]] = []  # (steps, lost), races that ended

    def __init__(self, admits: bool) -> None:
        self.metadata = {"may_discard_episodes": admits}
        self.races = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.races = 0, self.races + 1
        return {"observation": np.zeros(1, np.float32)}, {}

    def step(self, action):
        self.t += 1
        lost = self.races % 3 == 0 and self.t == 9
        ended = lost or self.t == 12
        if ended:
            SometimesLost.played.append((self.t - 1 if lost else self.t, lost))  # a lost step never happened
        return {"observation": np.full(1, self.t, np.float32)}, 1.0, False, ended, {"discarded": lost}


def _train_on_sometimes_lost(admits: bool):
    from rulka.graph_manager import BasicRLGraphManager
    from tests.rulka.collection.envs import small_config

    SometimesLost.played = []
    config = small_config(collectors=0, envs_per_collector=2, rollout_chunk_actions=4)
    graph_manager = BasicRLGraphManager(IQNAgent, config, env_factory=lambda params, instance=0: SometimesLost(admits))
    graph_manager.create(None, "cpu", 0)
    graph_manager.improve(400, show_progress=False)
    return graph_manager


def test_an_environment_that_may_lose_races_gets_none_of_a_lost_race_stored():
    """An environment whose metadata says it may discard episodes (a real game that hangs): the learner
    holds each race's chunks (4 actions) until the race ends, so the replay gets every step of the races
    that ended and none of a lost one, whose first 8 steps were sent in two chunks before it was lost.
    Without the metadata they are stored (what the test tells apart)."""
    graph_manager = _train_on_sometimes_lost(admits=True)
    kept = sum(steps for steps, lost in SometimesLost.played if not lost)
    lost = sum(steps for steps, lost in SometimesLost.played if lost)
    assert lost >= 8 * 5 and graph_manager.held is not None
    assert graph_manager.agent.memory.transitions_added == kept
    assert graph_manager.agent.counters.env_steps >= 400

    old = _train_on_sometimes_lost(admits=False)
    kept_old = sum(steps for steps, lost in SometimesLost.played if not lost)
    assert old.held is None and old.agent.memory.transitions_added > kept_old  # lost races' chunks stored


def test_held_chunks_are_stored_in_order_at_the_end_and_dropped_with_their_collector():
    """HeldEpisodes: nothing until the episode ends, then every chunk in play order; a discarded episode
    gives nothing; a dead collector's open episodes are forgotten; an evaluation chunk passes at once."""
    from rulka.collection.episodes import HeldEpisodes
    from rulka.collection.rollout import EpisodeSpec, Rollout
    from rulka.core_types import RunPhase

    def chunk(source, episode, ended=False, discarded=False, store=True):
        return Rollout(source, episode, EpisodeSpec(store=store), RunPhase.TRAIN, {"observation": np.zeros((5, 1))},
                       np.zeros(4, np.int64), np.zeros(4, bool), np.zeros(4, np.float32),
                       truncated=ended and not discarded, discarded=discarded)

    def same(got, expected):
        return len(got) == len(expected) and all(a is b for a, b in zip(got, expected))

    held = HeldEpisodes()
    first, second = chunk((0, 1, 0), 5), chunk((0, 1, 0), 5)
    assert same(held.add(first), []) and same(held.add(second), []) and len(held.open) == 1
    last = chunk((0, 1, 0), 5, ended=True)
    assert same(held.add(last), [first, second, last]) and not held.open
    assert same(held.add(chunk((0, 1, 1), 6)), []) and same(held.add(chunk((0, 1, 1), 6, True, discarded=True)), [])
    assert same(held.add(chunk((1, 2, 2), 7)), []) and held.forget_source(1, 2) == 1 and not held.open
    evaluation = chunk((0, 1, 0), 8, store=False)
    assert same(held.add(evaluation), [evaluation])
