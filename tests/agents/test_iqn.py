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
