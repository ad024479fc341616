import numpy as np
import pytest
import torch

from agents.losses import quantile_huber_loss
from agents.precision import Precision
from agents.trackmania_iqn_agent import TrackManiaIQNAgent
from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig
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
    runs, Linesight's running typical losses move from 0.01, the test buffer receives whole episodes
    and its loss is on the training loss's scale, and with PER the priorities spread out."""
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
    assert agent.typical_self_loss != 0.01 and agent.typical_clamped_self_loss != 0.01
    assert agent.test_memory.transitions_added > 0 and agent.memory.transitions_added > 0
    assert agent.counters.env_steps == 600 and not agent.test_memory.prioritized
    test_loss = agent.test_loss()
    assert test_loss is not None and 0.05 < test_loss / stats["loss"] < 20
    if prio_alpha > 0:
        assert agent.memory.prioritized
        leaves = agent.memory.priorities[: agent.memory.num_slots_used]
        assert len(np.unique(np.round(leaves[leaves > 0], 6))) > 1


def test_test_buffer_is_sized_for_its_share():
    """The held-out buffer holds buffer_test_ratio of the capacity, not a second full-size buffer."""
    config = load_graph_manager("trackmania_iqn_uni").config
    # the uni preset's reference lines are real-game files absent here: race the built-in track instead
    agent = agent_for(apply_overrides(config, overrides=["environment.backend=sim",
                                                         "map_cycle.entries=[{short_name: short, map_path: short}]"]))
    assert agent.memory.capacity == 50_000
    assert agent.test_memory.capacity == 2_500


def small_sim_agent(**overrides) -> tuple[TrackManiaIQNAgent, TrackManiaEnv]:
    config = apply_overrides(load_graph_manager("trackmania_iqn_sim").config, overrides=[
        "memory.memory_size_schedule=[[0, [2000, 100]]]", "memory.buffer_test_ratio=0", "training.batch_size=16",
        *[f"{k}={v}" for k, v in overrides.items()]])
    env = TrackManiaEnv(config.environment)
    return TrackManiaIQNAgent(config, env.observation_space, env.action_space, "cpu", seed=0), env


def fill_from_sim(agent: TrackManiaIQNAgent, env: TrackManiaEnv, steps: int) -> None:
    obs, _ = env.reset(seed=0)
    for _ in range(steps):
        info = agent.act({k: v[None] for k, v in obs.items()}, RunPhase.HEATUP)
        nxt, reward, terminated, truncated, _ = env.step(int(info.actions[0]))
        agent.observe(obs, int(info.actions[0]), False, reward, nxt, terminated, truncated)
        obs = nxt if not (terminated or truncated) else env.reset()[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_loss_on_a_fixed_batch_falls_when_trained_on_it(dtype):
    """Learning, not just finite numbers, in float32 and in bfloat16 (forced, so on any CPU): 150
    updates on one fixed mini-race batch (targets from a frozen target network) cut its quantile
    loss, measured in float32 with the same taus before and after, by more than half."""
    torch.manual_seed(0)
    agent, env = small_sim_agent(**{"performance.precision": "float32"})
    fill_from_sim(agent, env, 300)
    if dtype is torch.bfloat16:
        agent.precision = Precision("bfloat16", "cpu", dtype, dtype, "test")
    batch = agent.memory.sample(16, agent.gamma())
    taus = torch.rand(16, agent.config.neural_network.iqn_n)

    def fixed_loss() -> float:
        with torch.no_grad():
            predicted, targets, _, _ = agent.quantiles(batch)
            online = agent.online_network(batch.states, taus).gather(
                2, batch.actions.view(16, 1, 1).expand(16, taus.shape[1], 1)).squeeze(2)
            return quantile_huber_loss(online, targets.mean(dim=1, keepdim=True).expand_as(online), taus,
                                       agent.config.neural_network.iqn_kappa).mean().item()

    torch.manual_seed(1)
    before = fixed_loss()
    for _ in range(150):
        agent.learn_from_batch(batch)
    torch.manual_seed(1)
    assert fixed_loss() < 0.5 * before


def test_linesight_loss_scaling_and_sum_by_hand():
    """scale_loss: spread = sqrt(self loss of the target quantiles); typical_self_loss <- 0.99 x 0.01 +
    0.01 x mean(spread); clamped = max(spread, typical / 4); typical_clamped <- 0.99 x 0.01 + 0.01 x
    mean(clamped); loss x typical_clamped / clamped. Targets [0, 0] (spread 0) and [0, 2] with taus
    [.25, .75], kappa 5e-3: worked out by hand; the batch's loss is the sum."""
    agent, _ = small_sim_agent(**{"neural_network.iqn_kappa": 5e-3})
    targets = torch.tensor([[0.0, 0.0], [0.0, 2.0]])
    taus = torch.tensor([[0.25, 0.75], [0.25, 0.75]])
    # self loss of [0, 2]: pairs (i, j) with d = t_j - t_i: (0,1) d=2 -> .25 x (2 - .0025); (1,0) d=-2 ->
    # |.75 - 1| x (2 - .0025); sum over j, mean over i: (.499375 + .499375) / 2 = .499375
    spread = np.sqrt([0.0, 0.499375])
    typical = 0.99 * 0.01 + 0.01 * spread.mean()
    clamped = np.maximum(spread, typical / 4.0)
    typical_clamped = 0.99 * 0.01 + 0.01 * clamped.mean()
    scaled = agent.scale_loss(torch.tensor([1.0, 1.0]), targets, taus, update_statistics=True)
    np.testing.assert_allclose(scaled.numpy(), typical_clamped / clamped, rtol=1e-5)
    assert agent.typical_self_loss == pytest.approx(typical) and agent.typical_clamped_self_loss == pytest.approx(
        typical_clamped)
    agent.scale_loss(torch.tensor([1.0, 1.0]), targets, taus, update_statistics=False)  # a test batch
    assert agent.typical_self_loss == pytest.approx(typical)
    assert agent.reduce_loss(torch.tensor([1.0, 2.0, 3.0])).item() == 6.0


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/statm"), reason="reads /proc (Linux)")
def test_building_the_agent_does_not_touch_the_replay_arrays():
    """Collectors build the same agent only to act: at the uni preset's size (50,000 slots of
    120 x 160 frames, ~1 GB of replay) construction must not write the memory's pages. Resident
    memory grows by far less than the replay's size."""
    def resident_bytes() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    config = apply_overrides(load_graph_manager("trackmania_iqn_uni").config, overrides=[
        "environment.backend=sim", "map_cycle.entries=[{short_name: short, map_path: short}]"])
    env = TrackManiaEnv(config.environment)
    before = resident_bytes()
    agent = TrackManiaIQNAgent(config, env.observation_space, env.action_space, "cpu", seed=0)
    grown = resident_bytes() - before
    assert agent.memory.nbytes() > 900e6
    assert grown < 0.25 * agent.memory.nbytes()


def synthetic_step(agent: TrackManiaIQNAgent, value: float, end: bool) -> None:
    """One stored step with constant observations (frame and floats filled with ``value``)."""
    space = agent.observation_space
    obs = {k: np.full(s.shape, value, s.dtype) for k, s in space.spaces.items()}
    agent.observe(obs, 0, True, 0.0, obs, end, False)


def test_episodes_go_whole_to_the_test_buffer_at_its_share():
    """With buffer_test_ratio 0.3 about 30 % of episodes go, whole, to the held-out buffer; every step counts
    as an env step; an abandoned episode is forgotten by both memories and the next episode draws anew."""
    agent, _ = small_sim_agent(**{"memory.buffer_test_ratio": 0.3})
    assert agent.test_memory is not None and not agent.test_memory.prioritized
    for _ in range(200):
        for t in range(3):
            synthetic_step(agent, t, t == 2)
    assert agent.counters.env_steps == 600
    test_episodes = agent.test_memory.transitions_added / 3
    assert agent.test_memory.transitions_added % 3 == 0 and agent.memory.transitions_added % 3 == 0
    assert 0.2 < test_episodes / 200 < 0.4
    synthetic_step(agent, 0, False)
    agent.abandon_episode()
    assert agent._episode_memory is None
    assert not agent.memory.storage.pending and not agent.test_memory.storage.pending


def test_test_buffer_capacity_and_absence():
    """The held-out buffer holds ceil(capacity x ratio) slots, at least 4 batches; ratio 0 means none."""
    agent, _ = small_sim_agent(**{"memory.buffer_test_ratio": 0.001})
    assert agent.test_memory.capacity == 16 * 4  # ceil(2000 x 0.001) = 2 < 64
    agent, _ = small_sim_agent(**{"memory.buffer_test_ratio": 0.1})
    assert agent.test_memory.capacity == 200
    agent, _ = small_sim_agent()
    assert agent.test_memory is None and agent.test_loss() is None


def test_test_loss_leaves_the_running_statistics_alone():
    """test_loss is None until the held-out buffer holds a batch; then it is the batch's loss with the running
    typical losses read, not updated."""
    agent, _ = small_sim_agent(**{"memory.buffer_test_ratio": 0.5})
    space = agent.observation_space

    def add_to_test_buffer(t: int, end: bool) -> None:
        obs = {k: np.full(s.shape, t, s.dtype) for k, s in space.spaces.items()}
        agent.test_memory.add(obs, 0, 1.0, obs, end, False)

    for t in range(15):
        add_to_test_buffer(t % 5, t % 5 == 4)
    assert len(agent.test_memory) == 15 and agent.test_loss() is None  # batch 16
    add_to_test_buffer(0, True)
    before = (agent.typical_self_loss, agent.typical_clamped_self_loss)
    loss = agent.test_loss()
    assert loss is not None and np.isfinite(loss) and loss > 0
    assert (agent.typical_self_loss, agent.typical_clamped_self_loss) == before


def test_mini_race_memory_and_float_head_follow_the_configuration():
    """The replay is a mini-race replay with the configured clock, horizon and oversampling; the float head
    normalises with the configured statistics and has the configured width."""
    agent, _ = small_sim_agent(**{"training.oversample_long_term_steps": 30,
                                  "training.oversample_maximum_term_steps": 3})
    config = agent.config
    assembler = agent.memory.assembler
    assert assembler.clock_key == "floats" and assembler.clock_index == config.mini_race_clock_index
    assert assembler.horizon == config.mini_race_horizon
    assert (assembler.clock_low, assembler.clock_shift) == (-30 + 3, 3)
    assert assembler.min_horizon == config.min_horizon_to_update_priority_actions
    floats = agent.online_network.embedder.embedders["floats"]
    mean, std = config.float_normalization
    np.testing.assert_allclose(floats.mean.numpy(), mean, rtol=1e-6)
    np.testing.assert_allclose(floats.std.numpy(), std, rtol=1e-6)
    assert floats.output_size == config.neural_network.float_hidden_dim == 128


def test_no_clamp_ratio_means_no_scaling():
    """target_self_loss_clamp_ratio <= 0 turns Linesight's scaling off: the losses pass unchanged."""
    agent, _ = small_sim_agent(**{"training.target_self_loss_clamp_ratio": 0})
    loss = torch.tensor([1.0, 3.0])
    out = agent.scale_loss(loss, torch.tensor([[0.0, 2.0], [1.0, 5.0]]), torch.tensor([[0.25, 0.75]] * 2), True)
    assert torch.equal(out, loss) and agent.typical_self_loss == 0.01


def test_checkpoint_keeps_running_losses_episode_generator_and_test_buffer():
    """state_dict / load_state_dict carry the running typical losses, the episode generator (which episode
    goes to the test buffer) and the test buffer."""
    agent, _ = small_sim_agent(**{"memory.buffer_test_ratio": 0.5})
    for t in range(30):
        synthetic_step(agent, t % 3, t % 3 == 2)
    agent.typical_self_loss, agent.typical_clamped_self_loss = 0.7, 0.9
    state = agent.state_dict(include_memory=True)
    expected_draw = agent.episode_rng.random()
    other, _ = small_sim_agent(**{"memory.buffer_test_ratio": 0.5})
    other.load_state_dict(state)
    assert (other.typical_self_loss, other.typical_clamped_self_loss) == (0.7, 0.9)
    assert other.episode_rng.random() == expected_draw
    assert other.test_memory.transitions_added == agent.test_memory.transitions_added > 0
    assert len(other.test_memory) == len(agent.test_memory)
    light = agent.state_dict(include_memory=False)
    assert "test_memory" not in light and "memory" not in light


def test_same_seed_routes_and_samples_alike():
    """One seed drives the test-buffer routing, the training memory and the test buffer: two agents built with
    it and fed the same steps route the same episodes and draw the same batches."""
    agents = [small_sim_agent(**{"memory.buffer_test_ratio": 0.5})[0] for _ in range(2)]
    for agent in agents:
        for t in range(60):
            synthetic_step(agent, t % 3, t % 3 == 2)
    a, b = agents
    assert a.test_memory.transitions_added == b.test_memory.transitions_added
    np.testing.assert_array_equal(a.memory.sample(8, 0.9).indices, b.memory.sample(8, 0.9).indices)
    np.testing.assert_array_equal(a.test_memory.sample(8, 0.9).indices, b.test_memory.sample(8, 0.9).indices)
    assert a.episode_rng.random() != a.exploration.rng.random()  # its own stream, not the exploration's


def test_both_memories_store_what_is_observed():
    """Training memory and test buffer both store the reward, the episode end (terminated or truncated) and
    the greediness of each step."""
    agent, _ = small_sim_agent(**{"memory.buffer_test_ratio": 0.5})
    space = agent.observation_space
    obs = {k: np.zeros(s.shape, s.dtype) for k, s in space.spaces.items()}
    for episode in range(40):
        agent.observe(obs, 1, False, 2.5, obs, False, False)
        agent.observe(obs, 2, True, 2.5, obs, episode % 2 == 0, episode % 2 == 1)
    for memory in (agent.memory, agent.test_memory):
        storage = memory.storage
        written = np.flatnonzero(storage.ready[: storage.size])
        assert len(memory) == memory.transitions_added > 0  # every episode ended, every window complete
        assert np.all(storage.rewards[written] == 2.5)
        assert np.array_equal(storage.greedy[written], storage.actions[written] == 2)
        assert storage.terminated[written].sum() > 0 and storage.terminated[written].sum() < len(written) // 2


def test_test_buffer_is_uniform_and_horizon_follows_the_environment():
    """With prioritized replay the test buffer stays uniform; the mini-race horizon is the environment's."""
    agent, _ = small_sim_agent(**{"memory.buffer_test_ratio": 0.2, "memory.prio_alpha": 0.6,
                                  "environment.temporal_mini_race_duration_ms": 5000})
    assert agent.memory.prioritized and not agent.test_memory.prioritized
    assert agent.memory.assembler.horizon == agent.config.mini_race_horizon < 140


def test_scaling_applies_from_a_clamp_ratio_of_1_and_old_checkpoints_load():
    """Any positive clamp ratio scales (1 included); a checkpoint without the running losses or the test buffer
    loads them as 0.01 and keeps the agent's own buffer."""
    agent, _ = small_sim_agent(**{"training.target_self_loss_clamp_ratio": 1.0, "memory.buffer_test_ratio": 0.5})
    loss = torch.tensor([1.0, 1.0])
    out = agent.scale_loss(loss, torch.tensor([[0.0, 2.0], [1.0, 5.0]]), torch.tensor([[0.25, 0.75]] * 2), True)
    assert not torch.equal(out, loss)
    state = agent.state_dict(include_memory=True)
    assert "memory" in state and "test_memory" in state
    light = agent.state_dict(include_memory=False)
    del light["typical_self_loss"], light["typical_clamped_self_loss"]
    agent.load_state_dict(light)
    assert agent.typical_self_loss == agent.typical_clamped_self_loss == 0.01 and agent.test_memory is not None


def _chunk(agent: TrackManiaIQNAgent, instance: int, episode: int, steps: int, value: float, last: bool):
    """A Rollout chunk of ``steps`` constant steps of race ``episode`` of environment ``instance``."""
    from rulka.collection.rollout import EpisodeSpec, Rollout

    space = agent.observation_space
    states = {k: np.full((steps + 1, *s.shape), value, s.dtype) for k, s in space.spaces.items()}
    return Rollout(source=(0, 1, instance), episode=episode, spec=EpisodeSpec(), phase=RunPhase.TRAIN, states=states,
                   actions=np.zeros(steps, np.int64), was_greedy=np.ones(steps, bool),
                   rewards=np.zeros(steps, np.float32), terminated=last)


def test_the_test_buffer_is_drawn_per_race_not_per_chunk():
    """Races sent in chunks (interleaved across environments, each chunk stored as a cut) land whole on
    one side: every race's chunk count divides both memories' transitions, and about 30 % of races are held out."""
    from rulka.collection.episodes import store_rollout

    agent, _ = small_sim_agent(**{"memory.buffer_test_ratio": 0.3, "memory.memory_size_schedule": "[[0, [20000, 100]]]"})
    sides = {}
    for race in range(1, 121):
        for piece in range(4):  # 4 chunks of 5 steps per race, two environments interleaved
            for instance in (0, 1):
                before = agent.test_memory.transitions_added
                store_rollout(agent, _chunk(agent, instance, race, 5, piece, last=piece == 3))
                sides.setdefault((instance, race), set()).add(agent.test_memory.transitions_added > before)
    assert all(len(s) == 1 for s in sides.values())  # no race split between the memories
    held_out = sum(s == {True} for s in sides.values()) / len(sides)
    assert 0.2 < held_out < 0.4
    assert not agent._stream_memory  # every finished race forgotten


def test_test_buffer_grows_with_the_training_memory():
    """memory_size_schedule raises the capacity: the held-out buffer keeps buffer_test_ratio of it."""
    agent, _ = small_sim_agent(**{"memory.buffer_test_ratio": 0.1,
                                  "memory.memory_size_schedule": "[[0, [2000, 100]], [50, [4000, 100]]]",
                                  "training.batch_size": 4})
    assert agent.test_memory.capacity == 200
    for t in range(120):
        synthetic_step(agent, t, t % 10 == 9)
    assert agent.memory.capacity == 4000 and agent.test_memory.capacity == 400
