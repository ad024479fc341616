import numpy as np
import pytest
import torch
from gymnasium import spaces

from agents.iqn_agent import IQNAgent
from agents.losses import quantile_huber_loss
from agents.networks.iqn_network import sample_symmetric_taus
from rulka.core_types import RunPhase
from rulka.parameters import ExperimentConfig, MemoryParameters, NeuralNetworkParameters, TrainingParameters
from rulka.schedules import Schedule


def test_quantile_huber_loss_matches_hand_computation():
    """predictions [0, 1] at taus [.25, .75], targets [.5, 3]: worked out by hand for kappa 1 and 2."""
    pred = torch.tensor([[0.0, 1.0]])
    target = torch.tensor([[0.5, 3.0]])
    taus = torch.tensor([[0.25, 0.75]])
    # kappa 1: i=0: .25*.125 + .25*2.5 = .65625; i=1: .25*.125 + .75*1.5 = 1.15625; mean .90625
    assert quantile_huber_loss(pred, target, taus, 1.0).item() == pytest.approx(0.90625)
    # kappa 2 (0.5/kappa * d^2 inside): i=0: .25*.0625 + .25*2 = .515625; i=1: .25*.0625 + .75*1 = .765625
    assert quantile_huber_loss(pred, target, taus, 2.0).item() == pytest.approx(0.640625)


def test_loss_is_zero_when_all_quantiles_agree():
    pred = torch.full((3, 4), 2.0)
    assert quantile_huber_loss(pred, pred.clone(), sample_symmetric_taus(3, 4), 5e-3).abs().max() == 0


def test_taus_are_stratified_and_symmetric():
    """Lower half has one draw per stratum [i/N, (i+1)/N); upper half mirrors it (1 - tau)."""
    taus = sample_symmetric_taus(1000, 8)
    lower, upper = taus[:, :4], taus[:, 4:]
    assert torch.allclose(upper, 1 - lower)
    for i in range(4):
        assert ((lower[:, i] >= i / 8) & (lower[:, i] < (i + 1) / 8)).all()
    assert taus.mean().item() == pytest.approx(0.5, abs=1e-6)
    with pytest.raises(ValueError, match="even"):
        sample_symmetric_taus(1, 7)


def small_agent() -> IQNAgent:
    config = ExperimentConfig(
        neural_network=NeuralNetworkParameters(vector_embedder_hidden_sizes=[16], dense_hidden_dimension=16,
                                               iqn_embedding_dimension=8, iqn_n=4, iqn_k=4, iqn_kappa=1.0),
        training=TrainingParameters(batch_size=8, n_steps=1, gamma_schedule=Schedule([(0, 0.0)], "staircase"),
                                    lr_schedule=Schedule([(0, 1e-2)], "staircase")),
        memory=MemoryParameters(memory_size_schedule=Schedule([(0, (100, 8))], "staircase"),
                                number_times_single_memory_is_used_before_discard=8.0),
    )
    space = spaces.Dict({"observation": spaces.Box(-1, 1, (3,), np.float32)})
    return IQNAgent(config, space, spaces.Discrete(2), "cpu", seed=0)


def test_iqn_learns_a_one_step_bandit():
    """With gamma 0, Q(s, a) converges to the reward of a: action 1 pays 1, action 0 pays 0."""
    agent = small_agent()
    rng = np.random.default_rng(0)
    for _ in range(400):
        s = {"observation": rng.uniform(-1, 1, 3).astype(np.float32)}
        a = int(rng.integers(2))
        agent.observe(s, a, True, float(a), s, True, False)
        agent.train()
    q = agent.q_values({"observation": torch.zeros(1, 3)}).detach()[0]
    assert q[1].item() == pytest.approx(1.0, abs=0.15) and q[0].item() == pytest.approx(0.0, abs=0.15)
    assert agent.act({"observation": np.zeros((1, 3), np.float32)}, RunPhase.EVALUATE).actions[0] == 1


def test_replay_ratio_gate_limits_sampled_transitions():
    """Learning samples at most number_times_single_memory_is_used_before_discard x stored transitions."""
    agent = small_agent()
    s = {"observation": np.zeros(3, np.float32)}
    for i in range(50):
        agent.observe(s, 0, True, 0.0, s, True, False)
        agent.train()
        stored = agent.memory.transitions_added - agent.learning_started_at_transition + 1 if agent.learning_started_at_transition is not None else 0
        assert agent.counters.transitions_sampled <= 8.0 * stored
    assert agent.counters.gradient_updates > 0
    assert agent.counters.transitions_sampled >= 8.0 * (50 - agent.learning_started_at_transition) - 8


def test_soft_target_update_moves_target_by_tau():
    agent = small_agent()
    with torch.no_grad():
        for p in agent.online_network.parameters():
            p.add_(1.0)
    before = [p.clone() for p in agent.target_network.parameters()]
    agent.sync_target_network(0.25)
    for b, t, o in zip(before, agent.target_network.parameters(), agent.online_network.parameters()):
        assert torch.allclose(t, b + 0.25 * (o - b))


class LinearQuantiles(torch.nn.Module):
    """Z(s, tau, a) = base[s, a] + tau * slope[s, a] for one-hot states: (B, N, A)."""

    def __init__(self, base, slope) -> None:
        super().__init__()
        self.base = torch.nn.Parameter(torch.tensor(base, dtype=torch.float32))
        self.slope = torch.tensor(slope, dtype=torch.float32)

    def forward(self, observations, taus):
        s = observations["observation"]  # (B, 3) one-hot
        return (s @ self.base).unsqueeze(1) + taus.unsqueeze(-1) * (s @ self.slope).unsqueeze(1)


def quantile_batch():
    """s0 --a1, R 0.5, discount 0.9--> s1 (weight 1); s2 --a0, R 2, discount 0.5--> s1 (weight 0.5)."""
    from rulka.core_types import TransitionBatch
    eye = torch.eye(3)
    return TransitionBatch(states={"observation": eye[[0, 2]]}, actions=torch.tensor([1, 0]),
                           returns=torch.tensor([0.5, 2.0]), discounts=torch.tensor([0.9, 0.5]),
                           next_states={"observation": eye[[1, 1]]}, weights=torch.tensor([1.0, 0.5]),
                           indices=np.array([0, 1]))


@pytest.mark.parametrize("use_ddqn", [False, True])
def test_iqn_targets_bootstrap_from_one_action_chosen_by_quantile_mean(use_ddqn):
    """targets = R + discount * Z_target(s', a*, tau') with a* the argmax of the quantile mean of the target
    network (of the online network with use_ddqn); predicted = Z_online(s, a, tau) of the taken action."""
    agent = small_agent()
    agent.config.neural_network.use_ddqn = use_ddqn
    # in s1 the target network prefers action 1 (mean 3 > 2), the online network action 0
    agent.target_network = LinearQuantiles([[0, 0], [1.5, 2.5], [0, 0]], [[0, 0], [1, 1], [0, 0]])
    agent.online_network = LinearQuantiles([[0, 1], [9, 0], [4, 0]], [[0, 2], [0, 0], [3, 0]])
    predicted, targets, taus, target_taus = agent.quantiles(quantile_batch())
    n = agent.config.neural_network.iqn_n
    assert predicted.shape == targets.shape == taus.shape == target_taus.shape == (2, n)
    torch.testing.assert_close(predicted, torch.stack([1 + 2 * taus[0], 4 + 3 * taus[1]]))
    base = 1.5 if use_ddqn else 2.5  # Z_target(s1, a*) = base + tau'
    expected = torch.tensor([[0.5], [2.0]]) + torch.tensor([[0.9], [0.5]]) * (base + target_taus)
    torch.testing.assert_close(targets, expected)
    assert not torch.equal(taus, target_taus)  # independent fractions for the two networks


def test_iqn_loss_priorities_and_stats_by_hand():
    """loss = mean(weight * quantile Huber); priority error = |mean(predicted) - mean(target)| per sample;
    mean_q = mean of the predicted quantiles."""
    agent = small_agent()
    agent.target_network = LinearQuantiles([[0, 0], [1.5, 2.5], [0, 0]], [[0, 0], [1, 1], [0, 0]])
    agent.online_network = LinearQuantiles([[0, 1], [9, 0], [4, 0]], [[0, 2], [0, 0], [3, 0]])
    torch.manual_seed(3)
    predicted, targets, taus, _ = agent.quantiles(quantile_batch())
    torch.manual_seed(3)
    out = agent.compute_loss(quantile_batch())
    per_sample = quantile_huber_loss(predicted, targets, taus, agent.config.neural_network.iqn_kappa)
    assert out.loss.item() == pytest.approx((per_sample * torch.tensor([1.0, 0.5])).mean().item(), rel=1e-6)
    torch.testing.assert_close(out.priority_errors, (predicted.mean(1) - targets.mean(1)).abs())
    assert out.stats["mean_q"] == pytest.approx(predicted.mean().item(), rel=1e-6)
    assert not out.priority_errors.requires_grad


def test_iqn_acts_on_the_mean_of_iqn_k_quantiles():
    """q_values averages iqn_k quantiles of the online network."""
    agent = small_agent()
    agent.config.neural_network.iqn_k = 6
    agent.online_network = LinearQuantiles([[0, 1], [9, 0], [4, 0]], [[0, 2], [0, 0], [3, 0]])
    agent.online_network.q_values = lambda obs, k: torch.full((1, 2), float(k))
    assert agent.q_values({"observation": torch.eye(3)[:1]}).tolist() == [[6.0, 6.0]]
