"""agents/demonstrations.py: the supervised losses, and pretraining that makes every TransitionBatch
agent (DQN, IQN, QR-DQN) pick the demonstrated actions, with the target network copied after."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agents.demonstrations import attach_demonstrations, demonstration_replay, pretrain, supervised_loss
from agents.dqn_agent import DQNAgent
from agents.iqn_agent import IQNAgent
from agents.qr_dqn_agent import QRDQNAgent
from memories.demonstrations import DemoEpisode, MixedReplay
from rulka.parameters import (DemonstrationParameters, ExperimentConfig, MemoryParameters, NeuralNetworkParameters,
                              TrainingParameters)
from rulka.core_types import RunPhase
from rulka.schedules import Schedule

SPACE = spaces.Dict({"observation": spaces.Box(-1, 1, (2,), np.float32)})


def test_large_margin_loss_is_dqfds():
    """max_a [Q + margin * (a != a_E)] - Q(a_E): zero once a_E leads by the margin, else the shortfall."""
    q = torch.tensor([[1.0, 0.0, 0.5], [1.0, 0.9, 0.0]])
    actions = torch.tensor([0, 0])
    np.testing.assert_allclose(supervised_loss(q, actions, "large_margin", 0.5).numpy(), [0.0, 0.4], atol=1e-6)
    np.testing.assert_allclose(supervised_loss(q, actions, "cross_entropy").numpy(),
                               (-torch.log_softmax(q, 1)[:, 0]).numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="large_margin"):
        supervised_loss(q, actions, "hinge")


def demo_episodes(rng: np.random.Generator, count: int = 4, length: int = 60) -> list[DemoEpisode]:
    """The demonstrator plays action 1 when the first feature is positive, else action 0."""
    episodes = []
    for _ in range(count):
        states = rng.uniform(-1, 1, (length + 1, 2)).astype(np.float32)
        actions = (states[:-1, 0] > 0).astype(np.int64)
        episodes.append(DemoEpisode({"observation": states}, actions, np.zeros(length, np.float32), True, False))
    return episodes


def config(loss: str) -> ExperimentConfig:
    return ExperimentConfig(
        neural_network=NeuralNetworkParameters(vector_embedder_hidden_sizes=[32], dense_hidden_dimension=32,
                                               iqn_n=8, iqn_k=8),
        training=TrainingParameters(batch_size=32, n_steps=2, lr_schedule=Schedule([(0, 3e-3)], "staircase")),
        memory=MemoryParameters(memory_size_schedule=Schedule([(0, (500, 32))], "staircase")),
        demonstrations=DemonstrationParameters(pretrain_loss=loss,
                                               batch_share_schedule=Schedule([(0, 0.5), (100, 0.0)], "linear")),
    )


@pytest.mark.parametrize("agent_class, loss", [(DQNAgent, "large_margin"), (IQNAgent, "large_margin"),
                                               (QRDQNAgent, "cross_entropy")])
def test_pretraining_teaches_the_demonstrated_actions(agent_class, loss):
    """After 150 updates the greedy action is the demonstrated one on >= 90 % of fresh states (about 50 %
    before); the updates count as gradient updates, not as sampled transitions; the target network
    equals the online one afterwards."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    agent = agent_class(config(loss), SPACE, spaces.Discrete(2), "cpu", seed=0)
    replay = demonstration_replay(agent, demo_episodes(rng), lambda o: o, float, seed=1)
    test = {"observation": torch.from_numpy(rng.uniform(-1, 1, (400, 2)).astype(np.float32))}
    wanted = (test["observation"][:, 0] > 0).long()

    def agreement() -> float:
        with torch.no_grad():
            return float((agent.q_values(test).argmax(1) == wanted).float().mean())

    before = agreement()
    result = pretrain(agent, replay, 150, loss, margin=0.8)
    assert agreement() >= 0.9 > before + 0.2
    assert result.updates == 150 and result.last_loss < result.first_loss
    assert agent.counters.gradient_updates == 150 and agent.counters.transitions_sampled == 0
    for online, target in zip(agent.online_network.parameters(), agent.target_network.parameters()):
        torch.testing.assert_close(online, target)


def test_attached_demonstrations_follow_the_share_schedule():
    """The agent's memory becomes a MixedReplay whose share is the schedule at the agent's counters
    (linear from 0.5 at step 0 to 0 at step 100: 0.05 at step 90); attaching again replaces the demonstrations."""
    agent = DQNAgent(config("large_margin"), SPACE, spaces.Discrete(2), "cpu", seed=0)
    collected = agent.memory
    replay = demonstration_replay(agent, demo_episodes(np.random.default_rng(1)), lambda o: o, float)
    memory = attach_demonstrations(agent, replay)
    assert isinstance(agent.memory, MixedReplay) and memory.collected is collected
    assert memory.demonstration_count(32) == 32  # nothing collected yet: all from the demonstrations
    agent.counters.env_steps = 50
    for t in range(40):
        agent.observe({"observation": np.zeros(2, np.float32)}, 0, True, 0.0,
                      {"observation": np.zeros(2, np.float32)}, t == 39, False)
    assert agent.counters.env_steps == 90 and memory.share() == pytest.approx(0.05)
    assert attach_demonstrations(agent, replay).collected is collected


def test_start_epsilon_skips_the_random_stretch_only_in_a_run_that_pretrains():
    """demonstrations.start_epsilon: an agent whose run pretrains reads its exploration schedules from
    where epsilon first comes down to start_epsilon, so it acts almost greedily from its first action
    (and its epsilon keeps decaying from there); with no demonstrations, no pretraining or 1.0 the
    schedules are untouched; a value the schedule never reaches is refused with the fix named."""
    import dataclasses

    from rulka.parameters import ExplorationParameters

    epsilon = Schedule([(0, 1.0), (10_000, 1.0), (60_000, 0.1), (600_000, 0.03)], "exponential")

    def agent_with(**demonstrations) -> DQNAgent:
        c = config("large_margin")
        c.exploration = ExplorationParameters(epsilon_schedule=epsilon)
        c.demonstrations = dataclasses.replace(c.demonstrations, **demonstrations)
        return DQNAgent(c, SPACE, spaces.Discrete(2), "cpu", seed=0)

    def current_epsilon(agent: DQNAgent) -> float:
        return agent.exploration.current_values(agent.exploration_step())["epsilon"]

    pretrains = agent_with(folders=["demos"], pretrain_updates=500, start_epsilon=0.1)
    assert current_epsilon(pretrains) == pytest.approx(0.1)
    pretrains.counters.env_steps = 270_000  # halfway (in log space) from 0.1 to 0.03
    assert current_epsilon(pretrains) == pytest.approx(math.sqrt(0.1 * 0.03))
    q = np.tile([[0.0, 1.0]], (2000, 1))
    pretrains.counters.env_steps = 0
    actions, was_greedy = pretrains.exploration.select(q, pretrains.exploration_step(), RunPhase.TRAIN)
    assert 0.85 < was_greedy.mean() < 0.99  # epsilon 0.1 (and a little Boltzmann), not 1.0
    for unchanged in (agent_with(start_epsilon=0.1), agent_with(folders=["demos"], pretrain_updates=0, start_epsilon=0.1),
                      agent_with(folders=["demos"], pretrain_updates=500, start_epsilon=1.0)):
        assert unchanged.exploration_step() == 0.0 and current_epsilon(unchanged) == 1.0

    refused = agent_with(folders=["demos"], pretrain_updates=500, start_epsilon=0.01).config.validation_problems()
    assert refused == ["demonstrations.start_epsilon: 0.01 is below every value of exploration.epsilon_schedule "
                       "(lowest 0.03); raise it to at least 0.03 (-cp demonstrations.start_epsilon=0.03), or lower "
                       "the schedule's last value"]
