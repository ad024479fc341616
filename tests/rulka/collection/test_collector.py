import numpy as np
import torch

from agents.iqn_agent import IQNAgent
from filters import InputFilter, OutputFilter
from rulka.collection.collector import Collector
from rulka.collection.episodes import EpisodeGatherer, store_rollout
from rulka.collection.rollout import EpisodePlan
from rulka.level_manager import LevelManager
from tests.rulka.collection.envs import Corridor, small_config


def _agent(config=None):
    config = config or small_config()
    env = Corridor()
    return IQNAgent(config, env.observation_space, env.action_space, "cpu", seed=0)


def _collector(agent, k, **kwargs):
    levels = [LevelManager(agent, Corridor(), InputFilter(), OutputFilter()) for _ in range(k)]
    return Collector(agent, levels, [EpisodePlan() for _ in range(k)], **kwargs)


def test_actions_of_all_environments_come_from_one_forward_pass(monkeypatch):
    """Batched inference: k environments, one q_values call per step with a batch of k."""
    agent = _agent()
    calls = []
    original = agent.q_values
    monkeypatch.setattr(agent, "q_values", lambda obs: calls.append(len(obs["observation"])) or original(obs))
    collector = _collector(agent, 8)
    for _ in range(5):
        collector.step(heatup=False)
    assert calls == [8] * 5
    assert collector.actions_played == 40


def test_long_episodes_come_in_chunks_that_rebuild_the_episode():
    """An episode longer than chunk_actions arrives in pieces; joined, they are the episode, states once."""
    agent = _agent()
    collector = _collector(agent, 1, chunk_actions=7)
    gatherer = EpisodeGatherer(keep_steps=True)
    chunks, record = [], None
    while record is None:
        for rollout in collector.step(heatup=True):
            chunks.append(rollout)
            record = gatherer.add(rollout)
    assert all(c.length == 7 for c in chunks[:-1]) and chunks[-1].length <= 7
    assert not any(c.episode_ended for c in chunks[:-1]) and chunks[-1].episode_ended
    states = record.states("observation")
    assert len(states) == record.length + 1 == sum(c.length for c in chunks) + 1
    assert np.array_equal(states[:, 1], np.arange(record.length + 1))  # the step counter, each state once
    assert record.final_info["position"] == states[-1, 0]


def test_a_cut_chunk_is_stored_as_a_truncation_and_a_continued_one_is_not():
    """Chunks from processes end in a cut (bootstrap from their last state); the learner's own chunks continue."""
    for continues, expected_slots in ((False, 2 * 3 + 2), (True, 6 + 1)):
        agent = _agent()
        collector = _collector(agent, 1, chunk_actions=3, continues=continues)
        rollouts = []
        while sum(r.length for r in rollouts) < 6:
            rollouts += collector.step(heatup=True)
        for rollout in rollouts[:2]:
            store_rollout(agent, rollout)
        assert agent.counters.env_steps == 6
        if continues:  # one open episode: 6 steps, no final state yet (+1 is the next write)
            assert agent.memory.num_slots_used == expected_slots - 1
        else:  # two stretches of 3 steps, each closed by its own last state
            assert agent.memory.num_slots_used == expected_slots
        assert agent.counters.episodes == 0


def test_evaluation_environments_and_training_ones_do_not_share_an_action_batch():
    """Environments in different phases (exploring vs greedy) still get their own phase's actions."""
    agent = _agent()
    agent.exploration.rng = np.random.default_rng(0)

    class Greedy(EpisodePlan):
        def next_episode(self):
            from rulka.collection.rollout import EpisodeSpec

            return EpisodeSpec(explore=False, store=False)

    levels = [LevelManager(agent, Corridor(), InputFilter(), OutputFilter()) for _ in range(2)]
    collector = Collector(agent, levels, [EpisodePlan(), Greedy()])
    rollouts = []
    with torch.no_grad():
        for _ in range(200):
            rollouts += collector.step(heatup=False)
    greedy = [r for r in rollouts if not r.spec.explore]
    exploring = [r for r in rollouts if r.spec.explore]
    assert greedy and exploring
    assert all(r.was_greedy.all() for r in greedy)  # epsilon is 1 at step 0: any exploration would show
    assert not all(r.was_greedy.all() for r in exploring)
