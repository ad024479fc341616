"""QR-DQN (agents/qr_dqn_agent.py): fixed fractions, the network's shape, the loss of a hand-worked batch
(which network gives which values), and that the learnt quantiles are those of the return distribution."""
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from agents.qr_dqn_agent import QRDQNAgent, QuantileNetwork, quantile_fractions
from rulka.core_types import RunPhase, TransitionBatch
from rulka.parameters import (ExperimentConfig, MemoryParameters, NeuralNetworkParameters, TrainingParameters)
from rulka.schedules import Schedule

SPACE = spaces.Dict({"observation": spaces.Box(-1, 1, (3,), np.float32)})


def small_agent(n: int = 2, use_ddqn: bool = True, kappa: float = 1.0, lr: float = 1e-2) -> QRDQNAgent:
    config = ExperimentConfig(
        neural_network=NeuralNetworkParameters(vector_embedder_hidden_sizes=[16], dense_hidden_dimension=16,
                                               iqn_n=n, iqn_kappa=kappa, use_ddqn=use_ddqn),
        training=TrainingParameters(batch_size=8, n_steps=1, gamma_schedule=Schedule([(0, 0.0)], "staircase"),
                                    lr_schedule=Schedule([(0, lr)], "staircase")),
        memory=MemoryParameters(memory_size_schedule=Schedule([(0, (500, 8))], "staircase"),
                                number_times_single_memory_is_used_before_discard=8.0),
    )
    return QRDQNAgent(config, SPACE, spaces.Discrete(2), "cpu", seed=0)


class TableNetwork(nn.Module):
    """Quantiles looked up by state number (the observation's first float): table (S, N, A)."""

    def __init__(self, table: list) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.tensor(table, dtype=torch.float32))

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.table[observations["observation"][:, 0].long()]


def one_transition(reward: float, discount: float) -> TransitionBatch:
    """s = state 0, action 0, s' = state 1."""
    state = lambda i: {"observation": torch.tensor([[float(i), 0.0, 0.0]])}  # noqa: E731
    return TransitionBatch(states=state(0), actions=torch.tensor([0]), returns=torch.tensor([reward]),
                           discounts=torch.tensor([discount]), next_states=state(1), weights=torch.ones(1),
                           indices=np.array([0]))


# Online: at s, action 0 has quantiles [0, 1]; at s' it prefers action 0 (means 10 vs -10).
ONLINE = [[[0.0, 5.0], [1.0, 5.0]], [[10.0, -10.0], [10.0, -10.0]]]
# Target: at s, values no correct loss may read; at s', action 0 = [0.5, 3] (mean 1.75), action 1 = [2, 2] (mean 2).
TARGET = [[[100.0, 100.0], [100.0, 100.0]], [[0.5, 2.0], [3.0, 2.0]]]


def with_tables(agent: QRDQNAgent) -> QRDQNAgent:
    agent.online_network = TableNetwork(ONLINE)
    agent.target_network = TableNetwork(TARGET).requires_grad_(False)
    return agent


def test_quantile_fractions_are_the_midpoints():
    """tau_i = (2i - 1) / 2N: N = 4 gives 1/8, 3/8, 5/8, 7/8; N = 1 the median; N = 0 is refused."""
    assert quantile_fractions(4).tolist() == [0.125, 0.375, 0.625, 0.875]
    assert quantile_fractions(1).tolist() == [0.5]
    with pytest.raises(ValueError, match="iqn_n"):
        quantile_fractions(0)


def test_network_gives_n_quantiles_per_action_and_acting_uses_their_mean():
    """(B, N, A) from the network; q_values is the mean over the N quantiles."""
    net = QuantileNetwork(SPACE, num_actions=3, num_quantiles=5, vector_hidden_sizes=[8], head_hidden_size=8,
                          dueling=True)
    x = {"observation": torch.randn(7, 3)}
    assert net(x).shape == (7, 5, 3)
    agent = with_tables(small_agent())
    q = agent.q_values({"observation": torch.tensor([[0.0, 0.0, 0.0]])})
    assert q.tolist() == [[0.5, 5.0]]
    action = agent.act({"observation": np.zeros((1, 3), np.float32)}, RunPhase.EVALUATE).actions[0]
    assert action == 1


def test_dueling_head_subtracts_the_mean_advantage_per_quantile():
    """Dueling: for each quantile, the mean over actions is the value stream's output."""
    torch.manual_seed(0)
    net = QuantileNetwork(SPACE, num_actions=4, num_quantiles=3, vector_hidden_sizes=[8], head_hidden_size=8,
                          dueling=True)
    x = {"observation": torch.randn(5, 3)}
    value = net.value(net.embedder(x))  # (B, N)
    assert torch.allclose(net(x).mean(dim=2), value, atol=1e-6)


def test_loss_of_a_hand_worked_batch_with_ddqn():
    """use_ddqn: a* = argmax of the ONLINE network at s' (action 0), valued by the TARGET network:
    targets [0.5, 3]; predictions: the online quantiles of the taken action at s, [0, 1]; fractions
    [.25, .75], kappa 1: i=0: .25 * (.125 + 2.5) = .65625; i=1: .25 * .125 + .75 * 1.5 = 1.15625;
    mean .90625."""
    out = with_tables(small_agent(use_ddqn=True)).compute_loss(one_transition(reward=0.0, discount=1.0))
    assert out.loss.item() == pytest.approx(0.90625)
    assert out.priority_errors.tolist() == pytest.approx([abs(0.5 - 1.75)])  # |mean(pred) - mean(target)|


def test_loss_of_a_hand_worked_batch_without_ddqn():
    """Without use_ddqn, a* maximises the TARGET network's mean (action 1, [2, 2]); targets
    1 + 0.5 * 2 = [2, 2]; i=0: .25 * (1.5 + 1.5) = .75; i=1: .75 * (.5 + .5) = .75; mean .75.
    The online network's values at s' (10 or -10) and the target's at s (100) must not matter."""
    out = with_tables(small_agent(use_ddqn=False)).compute_loss(one_transition(reward=1.0, discount=0.5))
    assert out.loss.item() == pytest.approx(0.75)


def test_gradient_reaches_only_the_taken_action_of_the_online_network():
    """The loss moves the online quantiles of (s, a) and nothing else; the target gets no gradient."""
    agent = with_tables(small_agent())
    agent.compute_loss(one_transition(0.0, 1.0)).loss.backward()
    grad = agent.online_network.table.grad
    assert grad[0, :, 0].abs().min() > 0
    grad[0, :, 0] = 0
    assert grad.abs().max() == 0
    assert agent.target_network.table.grad is None


def test_learnt_quantiles_are_those_of_the_return_distribution():
    """A one-state bandit whose action 0 pays 0 or 1 with probability 1/2 (gamma 0): with N = 4 the
    quantiles at 1/8, 3/8, 5/8, 7/8 converge to [0, 0, 1, 1] (a scalar Q would give 0.5 everywhere;
    wrong fractions would move the middle two)."""
    agent = small_agent(n=4, kappa=0.01, lr=1e-2)
    rng = np.random.default_rng(0)
    s = {"observation": np.zeros(3, np.float32)}
    for _ in range(300):
        agent.observe(s, 0, True, float(rng.integers(2)), s, True, False)
        agent.train()
    quantiles = agent.online_network({"observation": torch.zeros(1, 3)})[0, :, 0].detach()
    assert quantiles.tolist() == pytest.approx([0.0, 0.0, 1.0, 1.0], abs=0.15)
