"""DQNAgent's loss on a batch worked out by hand, with table networks in place of the MLPs."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gymnasium import spaces
from torch import nn

from agents.dqn_agent import DQNAgent
from rulka.core_types import TransitionBatch
from rulka.parameters import ExperimentConfig, NeuralNetworkParameters

SPACE = spaces.Dict({"observation": spaces.Box(0, 1, (3,), np.float32)})


class TableQ(nn.Module):
    """Q(s, .) = table[s] for one-hot states: (B, 3) -> (B, 2)."""

    def __init__(self, table) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.tensor(table, dtype=torch.float32))

    def forward(self, observations):
        return observations["observation"] @ self.table


def one_hot(*states):
    return {"observation": torch.eye(3)[list(states)]}


def batch() -> TransitionBatch:
    """s0 --a1, R 0.5, discount 0.9--> s1 (weight 1); s2 --a0, R 3, discount 0.5--> s2 (weight 0.5)."""
    return TransitionBatch(states=one_hot(0, 2), actions=torch.tensor([1, 0]), returns=torch.tensor([0.5, 3.0]),
                           discounts=torch.tensor([0.9, 0.5]), next_states=one_hot(1, 2),
                           weights=torch.tensor([1.0, 0.5]), indices=np.array([0, 1]))


def agent(use_ddqn: bool) -> DQNAgent:
    config = ExperimentConfig(neural_network=NeuralNetworkParameters(
        vector_embedder_hidden_sizes=[4], dense_hidden_dimension=4, use_ddqn=use_ddqn))
    a = DQNAgent(config, SPACE, spaces.Discrete(2), "cpu", seed=0)
    a.online_network = TableQ([[0.0, 1.0], [5.0, 1.0], [0.2, 0.0]])  # online prefers action 0 in s1 and s2
    a.target_network = TableQ([[0.0, 0.0], [2.0, 4.0], [-2.0, -1.0]])  # target prefers action 1 in s1 and s2
    return a


@pytest.mark.parametrize("use_ddqn, bootstrap", [(False, (4.0, -1.0)), (True, (2.0, -2.0))])
def test_dqn_loss_by_hand(use_ddqn, bootstrap):
    """target = R + discount * Q_target(s', a*), a* = argmax of the target network (of the online network
    with use_ddqn); loss = mean(weight * Huber(Q(s, a) - target)); priority error = |Q(s, a) - target|."""
    out = agent(use_ddqn).compute_loss(batch())
    targets = torch.tensor([0.5 + 0.9 * bootstrap[0], 3.0 + 0.5 * bootstrap[1]])
    q = torch.tensor([1.0, 0.2])  # Q(s0, 1), Q(s2, 0)
    expected = (F.smooth_l1_loss(q, targets, reduction="none") * torch.tensor([1.0, 0.5])).mean()
    assert out.loss.item() == pytest.approx(expected.item())
    torch.testing.assert_close(out.priority_errors, (q - targets).abs())
    assert out.stats == {"mean_q": pytest.approx(0.6)}
    # by hand for the default (target) choice: |1 - 4.1| = 3.1 -> 2.6; |0.2 - 2.5| = 2.3 -> 1.8 x 0.5; mean 1.75
    if not use_ddqn:
        assert out.loss.item() == pytest.approx(1.75)


def test_dqn_loss_gradient_reaches_only_the_online_network():
    """The target is gradient-free: backward fills the online table's gradient, never the target's."""
    a = agent(False)
    a.compute_loss(batch()).loss.backward()
    assert a.online_network.table.grad is not None and a.online_network.table.grad.abs().sum() > 0
    assert a.target_network.table.grad is None


def test_dqn_acts_on_the_online_network_and_honours_dueling():
    """q_values are the online network's; neural_network.dueling gives the network a value stream."""
    a = agent(False)
    torch.testing.assert_close(a.q_values(one_hot(1)), torch.tensor([[5.0, 1.0]]))
    for dueling in (True, False):
        config = ExperimentConfig(neural_network=NeuralNetworkParameters(
            vector_embedder_hidden_sizes=[4], dense_hidden_dimension=4, dueling=dueling))
        net = DQNAgent(config, SPACE, spaces.Discrete(2), "cpu", seed=0).online_network
        assert net.head.dueling is dueling and hasattr(net.head, "value") is dueling
