import numpy as np
import pytest
import torch

from agents.trackmania_iqn_agent import TrackManiaIQNAgent
from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.experiment_parameters import TrackManiaExperimentConfig
from rulka.config import apply_overrides
from rulka.core_types import RunPhase
from rulka.presets import load_graph_manager


def agent_for(config: TrackManiaExperimentConfig) -> TrackManiaIQNAgent:
    env = TrackManiaEnv(config.environment)
    return TrackManiaIQNAgent(config, env.observation_space, env.action_space, "cpu", seed=0)


def test_default_network_has_linesight_parameter_count_and_shapes():
    """At 160 x 120 and the guide's defaults the network has Linesight's 6,578,333 parameters and
    maps (B, 1, 120, 160) frames + (B, 184) floats to (B, N, 12) quantiles."""
    agent = agent_for(TrackManiaExperimentConfig())
    net = agent.online_network
    assert sum(p.numel() for p in net.parameters()) == 6_578_333
    assert net.embedder.embedders["frame"].output_size == 32 * 11 * 16
    obs = {"frame": torch.zeros(2, 1, 120, 160, dtype=torch.uint8), "floats": torch.zeros(2, 184)}
    assert net(obs, torch.rand(2, 8)).shape == (2, 8, 12)
    assert agent.q_values(obs).shape == (2, 12)


def test_uni_preset_loads_and_validates_its_yaml():
    """trackmania_iqn_uni's YAML holds the guide's defaults and loads into the typed parameters."""
    config = load_graph_manager("trackmania_iqn_uni").config
    assert config.environment.backend == "tmi"
    assert config.training.batch_size == 512 and config.neural_network.iqn_kappa == 5e-3
    assert config.environment.H_downsized == 120 and config.environment.constant_reward_per_ms == -0.0012
    assert config.memory.memory_size_schedule.value(6_000_000) == (100_000, 75_000)
    assert config.exploration.epsilon_schedule.value(50_000) == pytest.approx(1.0)
    assert config.min_horizon_to_update_priority_actions == 100
    assert len(config.map_cycle.entries) == 2 and config.map_cycle.entries[0].repeat == 4


def test_guide_yaml_rewards_section_routes_to_environment():
    config = apply_overrides(TrackManiaExperimentConfig(), overrides=["rewards.constant_reward_per_ms=-0.002",
                                                                       "neural_network.W_downsized=64"])
    assert config.environment.constant_reward_per_ms == -0.002 and config.environment.W_downsized == 64


@pytest.mark.parametrize("prio_alpha", [0.0, 0.6])
def test_agent_learns_from_the_mini_race_batch(prio_alpha):
    """A few hundred simulator steps through the agent (uniform and prioritized replay): training
    runs, the target-spread EMA is set, the test buffer receives whole episodes, the loss stays
    finite, and with PER the sampled priorities move away from their initial value."""
    config = apply_overrides(load_graph_manager("trackmania_iqn_sim").config, overrides=[
        "memory.memory_size_schedule=[[0, [2000, 200]]]", "memory.buffer_test_ratio=0.3",
        "training.batch_size=16", f"memory.prio_alpha={prio_alpha}"])
    env = TrackManiaEnv(config.environment)
    agent = TrackManiaIQNAgent(config, env.observation_space, env.action_space, "cpu", seed=0)
    obs, _ = env.reset(seed=0)
    stats = None
    for _ in range(600):
        batched = {k: v[None] for k, v in obs.items()}
        info = agent.act(batched, RunPhase.TRAIN)
        nxt, reward, terminated, truncated, _ = env.step(int(info.actions[0]))
        agent.observe(obs, int(info.actions[0]), bool(info.was_greedy[0]), reward, nxt, terminated, truncated)
        stats = agent.train() or stats
        obs = nxt if not (terminated or truncated) else env.reset()[0]
    assert stats is not None and np.isfinite(stats["loss"])
    assert agent.target_spread_ema is not None and agent.target_spread_ema > 0
    assert agent.test_memory.transitions_added > 0 and agent.memory.transitions_added > 0
    assert agent.counters.env_steps == 600
    if prio_alpha > 0:
        assert type(agent.memory).__name__ == "PrioritizedMiniRaceReplay"
        agent.memory.sample_indices(1)  # brings the tree up to date
        leaves = agent.memory.tree.leaves[: agent.memory.num_slots_used]
        assert len(np.unique(np.round(leaves[leaves > 0], 6))) > 1


def test_test_buffer_is_sized_for_its_share():
    """The held-out buffer holds buffer_test_ratio of the capacity, not a second full-size buffer."""
    config = load_graph_manager("trackmania_iqn_uni").config
    agent = agent_for(apply_overrides(config, overrides=["environment.backend=sim"]))
    assert agent.memory.capacity == 50_000
    assert agent.test_memory.capacity == 2_500
