"""The Agent base and its subclasses: what goes wrong when the algorithm is wrong."""
from __future__ import annotations

import ast
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from agents.agent import MAX_CONSECUTIVE_NON_FINITE
from agents.dqn_agent import DQNAgent
from agents.iqn_agent import IQNAgent
from rulka.config import apply_overrides
from rulka.core_types import RunPhase
from rulka.parameters import ExperimentConfig, MemoryParameters, NeuralNetworkParameters, TrainingParameters
from rulka.presets import load_graph_manager
from rulka.schedules import Schedule

SPACE = spaces.Dict({"observation": spaces.Box(-1, 1, (2,), np.float32)})
S0 = {"observation": np.array([1.0, 0.0], np.float32)}
S1 = {"observation": np.array([0.0, 1.0], np.float32)}


def chain_config(batch_size=32, every=32, tau=1.0, gamma=0.9, times_used=8.0, start=32) -> ExperimentConfig:
    return ExperimentConfig(
        neural_network=NeuralNetworkParameters(
            vector_embedder_hidden_sizes=[32], dense_hidden_dimension=32, iqn_embedding_dimension=16, iqn_n=8,
            iqn_k=8, iqn_kappa=1.0, dueling=False,
            number_memories_trained_on_between_target_network_updates=every, soft_update_tau=tau),
        training=TrainingParameters(batch_size=batch_size, n_steps=1, gamma_schedule=Schedule([(0, gamma)], "staircase"),
                                    lr_schedule=Schedule([(0, 3e-3)], "staircase"), adam_epsilon=1e-8),
        memory=MemoryParameters(memory_size_schedule=Schedule([(0, (4000, start))], "staircase"),
                                number_times_single_memory_is_used_before_discard=times_used),
    )


def feed_chain(agent, steps: int, rng: np.random.Generator) -> None:
    """s0 --any action, reward 0--> s1; in s1 action 0 pays 1, action 1 pays 0, then the episode terminates."""
    for _ in range(steps // 2):
        agent.observe(S0, int(rng.integers(2)), True, 0.0, S1, False, False)
        a = int(rng.integers(2))
        agent.observe(S1, a, True, float(a == 0), S1, True, False)
        agent.handle_episode_ended()
        agent.train()


def chain_values(agent) -> np.ndarray:
    obs = {"observation": torch.as_tensor(np.stack([S0["observation"], S1["observation"]]))}
    with torch.no_grad():
        return agent.q_values(obs).numpy()


@pytest.mark.parametrize("agent_class", [DQNAgent, IQNAgent])
def test_values_converge_on_a_two_step_chain(agent_class):
    """Q(s1) = (1, 0) and Q(s0, .) = gamma x max Q(s1) = 0.9: bootstrapping through a target network
    that is updated and evaluated at the best action. An agent whose target network is never
    updated, or that bootstraps from the worst action (argmin), misses Q(s0) = 0.9."""
    torch.manual_seed(0)
    agent = agent_class(chain_config(), SPACE, spaces.Discrete(2), "cpu", seed=0)
    feed_chain(agent, 1600, np.random.default_rng(0))
    q = chain_values(agent)
    np.testing.assert_allclose(q[1], [1.0, 0.0], atol=0.1)
    np.testing.assert_allclose(q[0], [0.9, 0.9], atol=0.1)


@pytest.mark.parametrize("agent_class", [DQNAgent, IQNAgent])
def test_target_network_follows_the_online_network_on_schedule(agent_class):
    """Target updates every `every` transitions sampled: with tau = 0.5 the target moves half-way to
    the online network exactly then, and not between."""
    agent = agent_class(chain_config(batch_size=8, every=16, tau=0.5, start=8, times_used=4.0), SPACE,
                        spaces.Discrete(2), "cpu", seed=0)  # one update per 2 transitions
    rng = np.random.default_rng(1)
    feed_chain(agent, 8, rng)  # 8 transitions stored, learning starts
    seen_updates = 0
    for _ in range(20):
        before = [p.clone() for p in agent.target_network.parameters()]
        sampled_before = agent.counters.transitions_sampled
        feed_chain(agent, 2, rng)
        crossed = agent.counters.transitions_sampled // 16 - sampled_before // 16
        changed = any(not torch.equal(b, p) for b, p in zip(before, agent.target_network.parameters()))
        assert changed == (crossed > 0)
        seen_updates += crossed
        if crossed == 1:  # one Polyak step of 0.5: target = (old target + online) / 2
            for b, t, o in zip(before, agent.target_network.parameters(), agent.online_network.parameters()):
                torch.testing.assert_close(t, 0.5 * (b + o))
    assert seen_updates >= 5


def test_replay_ratio_gate_matches_hand_counts():
    """Batch 8, each transition used 4 times, learning from 16 stored transitions: after the k-th
    transition counted from the 16th (k = 1, 2, ...) the gate has allowed floor(4 k / 8) = floor(k / 2)
    updates in all: 0, 1, 1, 2, 2, 3, ... (worked out by hand, not from the implementation). Each
    transition is a one-step episode, so it can be sampled as soon as it is stored."""
    agent = IQNAgent(chain_config(batch_size=8, times_used=4.0, start=16), SPACE, spaces.Discrete(2), "cpu", seed=0)
    updates = []
    for i in range(1, 31):
        agent.observe(S0, 0, True, 0.0, S1, True, False)
        agent.train()
        if i >= 16:
            updates.append(agent.counters.gradient_updates)
    assert updates[:15] == [0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]
    assert agent.counters.transitions_sampled == 8 * updates[-1]


@pytest.mark.reliability
def test_non_finite_loss_skips_the_batch_counts_it_and_stops_when_it_persists():
    """A NaN reward makes the loss NaN: no optimizer step (weights unchanged), counted in the stats;
    MAX_CONSECUTIVE_NON_FINITE in a row raise a RuntimeError naming the count and fixes."""
    agent = IQNAgent(chain_config(batch_size=8, times_used=8.0, start=8), SPACE, spaces.Discrete(2), "cpu", seed=0)
    for _ in range(8):
        agent.observe(S0, 0, True, float("nan"), S1, True, False)
    weights = [p.clone() for p in agent.online_network.parameters()]
    stats = agent.train()
    assert stats is not None and stats["non_finite_losses"] == 1 and np.isnan(stats["loss"])
    assert agent.counters.gradient_updates == 0 and agent.counters.transitions_sampled == 8
    assert all(torch.equal(a, b) for a, b in zip(weights, agent.online_network.parameters()))
    with pytest.raises(RuntimeError, match=f"{MAX_CONSECUTIVE_NON_FINITE} batches in a row.*learning rate"):
        for _ in range(MAX_CONSECUTIVE_NON_FINITE):
            agent.observe(S0, 0, True, float("nan"), S1, True, False)
            agent.train()
    assert agent.non_finite_losses == MAX_CONSECUTIVE_NON_FINITE


def test_cartpole_prioritized_memory_updates_priorities_and_samples_by_them():
    """cartpole_iqn with memory.prio_alpha=0.6: the base agent updates the priorities (they spread out
    from the default) and the draws follow them (more draws of the high-priority half)."""
    config = apply_overrides(load_graph_manager("cartpole_iqn").config, overrides=[
        "memory.prio_alpha=0.6", "memory.memory_size_schedule=[[0, [3000, 200]]]", "training.batch_size=32",
        "memory.number_times_single_memory_is_used_before_discard=8", "neural_network.iqn_k=8",
        "neural_network.vector_embedder_hidden_sizes=[32, 32]", "neural_network.dense_hidden_dimension=32"])
    env = gym.make("CartPole-v1")
    agent = IQNAgent(config, spaces.Dict({"observation": env.observation_space}), env.action_space, "cpu", seed=0)
    obs, _ = env.reset(seed=0)
    for _ in range(600):
        s = {"observation": obs.astype(np.float32)}
        info = agent.act({"observation": s["observation"][None]}, RunPhase.TRAIN)
        obs, r, te, tr, _ = env.step(int(info.actions[0]))
        agent.observe(s, int(info.actions[0]), bool(info.was_greedy[0]), float(r),
                      {"observation": obs.astype(np.float32)}, te, tr)
        agent.train()
        if te or tr:
            obs, _ = env.reset()
    assert agent.counters.gradient_updates > 50 and agent.memory.prioritized
    priorities = agent.memory.priorities
    ready = np.flatnonzero(priorities > 0)
    assert len(np.unique(np.round(priorities[ready], 6))) > 50
    draws = np.concatenate([agent.memory.sample(64, 0.99).indices for _ in range(300)])
    high = priorities[ready] > np.median(priorities[ready])
    counts = np.bincount(draws, minlength=len(priorities))[ready]
    expected_high = priorities[ready][high].sum() / priorities[ready].sum()
    assert counts[high].sum() / counts.sum() == pytest.approx(expected_high, abs=0.02)
    assert expected_high > 0.55  # uniform sampling would draw the high half ~0.5 of the time


def test_agents_import_nothing_from_environments():
    """agents/ must not import environments/ (dependencies point down): every import statement of
    every module under agents/, parsed with ast."""
    root = Path(__file__).resolve().parents[2] / "agents"
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n == "environments" or n.startswith("environments.")]
    assert list(root.rglob("*.py")) and offenders == []


def gate_config(**training) -> ExperimentConfig:
    """A small IQN configuration; ``training`` overrides TrainingParameters fields."""
    config = chain_config(batch_size=4, start=4, times_used=4.0)
    for k, v in training.items():
        setattr(config.training, k, v)
    return config


def test_heatup_acts_at_random_and_training_acts_on_q():
    """Heatup: uniformly random actions, none counted greedy, no Q computed. Training: the exploration
    policy chooses from the network's Q (E, A), at the step of its schedule's counter."""
    agent = IQNAgent(gate_config(), SPACE, spaces.Discrete(2), "cpu", seed=0)
    obs = {"observation": np.zeros((500, 2), np.float32)}
    info = agent.act(obs, RunPhase.HEATUP)
    assert info.q_values is None and not info.was_greedy.any() and info.actions.shape == (500,)
    assert 0.4 < (info.actions == 1).mean() < 0.6
    agent.config.exploration.epsilon_schedule = Schedule([(0, 0.0), (10, 1.0)], "linear")
    agent.config.exploration.epsilon_boltzmann_schedule = Schedule([(0, 0.0)], "staircase")
    agent.exploration = agent.create_exploration_policy(0)
    info = agent.act(obs, RunPhase.TRAIN)  # env_steps 0: epsilon 0, greedy
    assert info.q_values.shape == (500, 2) and info.was_greedy.all()
    np.testing.assert_array_equal(info.actions, info.q_values.argmax(axis=1))
    agent.counters.env_steps = 10  # epsilon 1: random, about half not greedy
    assert 0.35 < (~agent.act(obs, RunPhase.TRAIN).was_greedy).mean() < 0.65


def test_exploration_policy_is_built_from_the_configuration():
    """The exploration section reaches the policy: evaluation_epsilon, Boltzmann schedule and tau."""
    config = gate_config()
    config.exploration.evaluation_epsilon = 1.0
    config.exploration.tau_epsilon_boltzmann = 0.25
    config.exploration.epsilon_boltzmann_schedule = Schedule([(0, 0.7)], "staircase")
    policy = IQNAgent(config, SPACE, spaces.Discrete(2), "cpu", seed=0).exploration
    assert policy.evaluation_epsilon == 1.0 and policy.tau == 0.25 and policy.num_actions == 2
    assert policy.epsilon_boltzmann_schedule.value(0) == 0.7


def test_schedules_run_at_global_schedule_speed():
    """lr and gamma are read at counter x global_schedule_speed."""
    config = gate_config(global_schedule_speed=2.0, lr_schedule=Schedule([(0, 1.0), (100, 0.0)], "linear"),
                         gamma_schedule=Schedule([(0, 0.5), (100, 0.9)], "linear"))
    agent = IQNAgent(config, SPACE, spaces.Discrete(2), "cpu", seed=0)
    agent.counters.env_steps = 25
    assert agent.learning_rate() == pytest.approx(0.5) and agent.gamma() == pytest.approx(0.7)
    assert agent.schedule_step(config.training.lr_schedule) == 50.0


def test_observe_counts_and_follows_the_memory_size_schedule():
    """Each observed step counts one env step; the memory is resized when memory_size_schedule says so;
    episodes are counted when they end."""
    config = gate_config()
    config.memory.memory_size_schedule = Schedule([(0, (100, 4)), (3, (300, 4))], "staircase")
    agent = IQNAgent(config, SPACE, spaces.Discrete(2), "cpu", seed=0)
    for _ in range(2):
        agent.observe(S0, 0, True, 0.0, S1, False, False)
    assert agent.counters.env_steps == 2 and agent.memory.capacity == 100
    agent.observe(S0, 0, True, 0.0, S1, True, False)
    assert agent.counters.env_steps == 3 and agent.memory.capacity == 300
    agent.handle_episode_ended()
    assert agent.counters.episodes == 1 and len(agent.memory) == 3


def test_abandoned_episode_never_becomes_sampleable():
    """abandon_episode drops the open n-step windows of an episode cut without a final state."""
    config = gate_config(n_steps=3)
    agent = IQNAgent(config, SPACE, spaces.Discrete(2), "cpu", seed=0)
    for _ in range(2):
        agent.observe(S0, 0, True, 0.0, S1, False, False)
    agent.abandon_episode()
    for _ in range(5):
        agent.observe(S0, 0, True, 0.0, S1, False, False)
    assert len(agent.memory) == 2  # the first 2 of the new episode; none of the abandoned ones


@pytest.mark.parametrize("start, batch_size, needed", [(10, 4, 10), (2, 6, 6)])
def test_learning_waits_for_the_larger_of_start_size_and_batch(start, batch_size, needed):
    """can_learn once the memory holds max(start_learning_size, batch_size) transitions."""
    config = chain_config(batch_size=batch_size, start=start)
    agent = IQNAgent(config, SPACE, spaces.Discrete(2), "cpu", seed=0)
    for i in range(1, needed + 1):
        assert agent.can_learn() is False
        agent.observe(S0, 0, True, 0.0, S1, True, False)
    assert agent.can_learn() is True


def test_optimize_returns_the_gradient_norm_and_clips_it():
    """optimize returns the norm before clipping; gradients are clipped to clip_grad_norm, then each value to
    clip_grad_value."""
    agent = IQNAgent(gate_config(), SPACE, spaces.Discrete(2), "cpu", seed=0)
    params = list(agent.online_network.parameters())
    count = sum(p.numel() for p in params)
    agent.config.neural_network.clip_grad_norm = 1e9
    agent.config.neural_network.clip_grad_value = 0.5
    norm = agent.optimize(sum((3.0 * p).sum() for p in params))
    assert norm == pytest.approx(3.0 * count ** 0.5, rel=1e-5)
    assert all(torch.all(p.grad == 0.5) for p in params)
    agent.config.neural_network.clip_grad_norm = 1.0
    agent.config.neural_network.clip_grad_value = 1000.0
    agent.optimize(sum((3.0 * p).sum() for p in params))
    total = torch.sqrt(sum((p.grad ** 2).sum() for p in params)).item()
    assert total == pytest.approx(1.0, rel=1e-4)


def test_weight_decay_multiplies_the_weights_after_each_step():
    """weight_decay_lr_ratio d: after a step that moves nothing (zero gradient) every weight is w * (1 - lr d)."""
    agent = IQNAgent(gate_config(weight_decay_lr_ratio=0.1, lr_schedule=Schedule([(0, 0.5)], "staircase")), SPACE,
                     spaces.Discrete(2), "cpu", seed=0)
    before = [p.detach().clone() for p in agent.online_network.parameters()]
    agent.optimize(sum((0.0 * p).sum() for p in agent.online_network.parameters()))
    for b, p in zip(before, agent.online_network.parameters()):
        torch.testing.assert_close(p.detach(), b * 0.95)


def test_training_uses_the_scheduled_learning_rate_and_reports_its_stats():
    """Every update sets the optimizer's lr from lr_schedule; the stats carry loss, grad_norm, mean_q and the
    non-finite count; the update counters move."""
    agent = IQNAgent(gate_config(lr_schedule=Schedule([(0, 0.25)], "staircase")), SPACE, spaces.Discrete(2), "cpu",
                     seed=0)
    agent.optimizer.param_groups[0]["lr"] = 123.0
    for _ in range(4):
        agent.observe(S0, 0, True, 1.0, S1, True, False)
    stats = agent.train()
    assert agent.optimizer.param_groups[0]["lr"] == 0.25
    assert set(stats) == {"loss", "grad_norm", "mean_q", "non_finite_losses"} and stats["non_finite_losses"] == 0.0
    assert agent.counters.gradient_updates == agent.counters.transitions_sampled // 4 > 0


def test_target_sync_copies_buffers_too():
    """Buffers (the embedders' normalisation statistics) are copied to the target, whatever tau."""
    agent = IQNAgent(gate_config(), SPACE, spaces.Discrete(2), "cpu", seed=0)
    online_buffers = dict(agent.online_network.named_buffers())
    online_buffers["embedder.embedders.observation.mean"].fill_(3.0)
    agent.sync_target_network(0.1)
    target_buffers = dict(agent.target_network.named_buffers())
    assert torch.all(target_buffers["embedder.embedders.observation.mean"] == 3.0)


def test_checkpoint_restores_counters_and_every_generator():
    """state_dict / load_state_dict: networks, counters, gate, non-finite count, the exploration and memory
    generators and the global torch / numpy / python generators come back, so the run goes on identically."""
    import random

    config = gate_config()
    agent = IQNAgent(config, SPACE, spaces.Discrete(2), "cpu", seed=0)
    feed_chain(agent, 20, np.random.default_rng(0))
    agent.non_finite_losses = 3
    state = agent.state_dict(include_memory=True)
    draws = (agent.exploration.rng.random(), agent.memory.rng.random(), torch.rand(1).item(), np.random.rand(),
             random.random())
    other = IQNAgent(config, SPACE, spaces.Discrete(2), "cpu", seed=1)
    other.load_state_dict(state)
    assert (other.exploration.rng.random(), other.memory.rng.random(), torch.rand(1).item(), np.random.rand(),
            random.random()) == draws
    assert other.counters == agent.counters and other.non_finite_losses == 3
    assert other.learning_started_at_transition == agent.learning_started_at_transition
    assert other.transitions_sampled_at_learning_start == agent.transitions_sampled_at_learning_start
    assert other.transitions_sampled_at_last_target_update == agent.transitions_sampled_at_last_target_update
    assert len(other.memory) == len(agent.memory)
    for a, b in zip(agent.target_network.parameters(), other.target_network.parameters()):
        assert torch.equal(a, b)
    for a, b in zip(agent.online_network.parameters(), other.online_network.parameters()):
        assert torch.equal(a, b)
    assert other.optimizer.state_dict()["state"].keys() == agent.optimizer.state_dict()["state"].keys()
    light = IQNAgent(config, SPACE, spaces.Discrete(2), "cpu", seed=1)
    light.load_state_dict(agent.state_dict(include_memory=False))
    assert light.learning_started_at_transition is None and len(light.memory) == 0


def test_evaluation_acts_with_the_evaluation_epsilon():
    """In evaluation the training epsilon is ignored: epsilon 1 in training, evaluation_epsilon 0, all greedy;
    heatup's was_greedy is a boolean mask."""
    config = gate_config()
    config.exploration.epsilon_schedule = Schedule([(0, 1.0)], "staircase")
    config.exploration.epsilon_boltzmann_schedule = Schedule([(0, 0.0)], "staircase")
    agent = IQNAgent(config, SPACE, spaces.Discrete(2), "cpu", seed=0)
    obs = {"observation": np.zeros((200, 2), np.float32)}
    assert agent.act(obs, RunPhase.EVALUATE).was_greedy.all()
    assert agent.act(obs, RunPhase.HEATUP).was_greedy.dtype == np.bool_


def test_observe_stores_truncation_and_greediness_and_counts_every_episode():
    """A truncated step ends the episode in memory (its window is complete); a non-greedy step is stored as
    such; every handle_episode_ended adds one episode."""
    agent = IQNAgent(gate_config(n_steps=3, discard_non_greedy_actions_in_nsteps=True), SPACE, spaces.Discrete(2),
                     "cpu", seed=0)
    agent.observe(S0, 0, False, 0.0, S1, False, False)
    agent.observe(S1, 1, True, 1.0, S1, False, True)
    assert len(agent.memory) == 2 and not agent.memory.storage.greedy[0] and agent.memory.storage.greedy[1]
    agent.handle_episode_ended()
    agent.handle_episode_ended()
    assert agent.counters.episodes == 2


def test_train_returns_none_before_learning_and_a_restart_counts_from_its_own_start():
    """No update yet: train returns None. After a restart without memory (transitions_sampled already high),
    the replay-ratio gate counts from the sampled count at the new start, so learning resumes."""
    agent = IQNAgent(gate_config(), SPACE, spaces.Discrete(2), "cpu", seed=0)
    assert agent.train() is None
    agent.counters.transitions_sampled = 10_000
    for _ in range(4):
        agent.observe(S0, 0, True, 0.0, S1, True, False)
    assert agent.train() is not None and agent.counters.gradient_updates == 1  # 1 stored since start x 4 / batch 4


def test_a_finite_loss_resets_the_non_finite_streak():
    """Only losses NaN or infinite in a row stop the run: a finite batch in between starts the count again."""
    agent = IQNAgent(chain_config(batch_size=8, times_used=8.0, start=8), SPACE, spaces.Discrete(2), "cpu", seed=0)
    for _ in range(8):
        agent.observe(S0, 0, True, 0.0, S1, True, False)
    batch = agent.sample_batch()
    nan_batch = agent.sample_batch()
    nan_batch.returns[:] = float("nan")
    for _ in range(MAX_CONSECUTIVE_NON_FINITE - 1):
        agent.learn_from_batch(nan_batch)
    agent.learn_from_batch(batch)
    assert agent.consecutive_non_finite_losses == 0
    for _ in range(MAX_CONSECUTIVE_NON_FINITE - 1):
        agent.learn_from_batch(nan_batch)
    assert agent.non_finite_losses == 2 * (MAX_CONSECUTIVE_NON_FINITE - 1)


def test_default_target_sync_is_a_copy_and_old_checkpoints_load():
    """sync_target_network() copies the online network; a checkpoint without the non-finite count loads as 0."""
    agent = IQNAgent(gate_config(), SPACE, spaces.Discrete(2), "cpu", seed=0)
    with torch.no_grad():
        for p in agent.online_network.parameters():
            p.add_(0.5)
    agent.sync_target_network()
    for t, o in zip(agent.target_network.parameters(), agent.online_network.parameters()):
        assert torch.equal(t, o)
    state = agent.state_dict(include_memory=False)
    del state["non_finite_losses"]
    agent.non_finite_losses = 5
    agent.load_state_dict(state)
    assert agent.non_finite_losses == 0
