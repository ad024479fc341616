import io

import numpy as np
import pytest
import torch
from gymnasium import spaces

from memories.high_priority_figures import write_highest_priority_figures
from memories.replay import Replay, make_replay
from memories.samplers import INITIAL_PRIORITY

SPACE = spaces.Dict({"observation": spaces.Box(-np.inf, np.inf, (1,), np.float32)})


def obs(value: float) -> dict[str, np.ndarray]:
    return {"observation": np.array([value], dtype=np.float32)}


def play(memory, length: int, start: float = 0.0, end: str = "terminated") -> None:
    """An episode of `length` steps whose states are start, start+1, ..."""
    for t in range(length):
        last = t == length - 1
        memory.add(obs(start + t), t % 3, 1.0, obs(start + t + 1), last and end == "terminated",
                   last and end == "truncated")


def make(capacity=64, n_steps=3, alpha=0.6, epsilon=2e-3, beta=1.0, space=SPACE, **kwargs) -> Replay:
    return make_replay(space, capacity, n_steps, seed=0, prio_alpha=alpha, prio_epsilon=epsilon, prio_beta=beta,
                       **kwargs)


def set_priorities(memory: Replay, slots, errors) -> int:
    return memory.sampler.update(memory.storage, np.asarray(slots), errors)


def ready_slots(memory) -> np.ndarray:
    return np.flatnonzero(memory.ready)


def test_only_ready_slots_have_priority_and_new_slots_get_linesights_default():
    """Open windows, final states and empty slots have priority 0. A slot that becomes ready gets
    0.4 before the first batch is drawn, then twice the average priority at the last draw
    (Linesight's CustomPrioritizedSampler), not the maximum."""
    memory = make(capacity=40, alpha=0.6)
    play(memory, 10, end="terminated")  # slots 0-9 ready, 10 final state
    play(memory, 6, start=100, end="open")  # slots 11-13 ready, 14-16 pending
    expected = np.zeros(40)
    expected[ready_slots(memory)] = INITIAL_PRIORITY
    np.testing.assert_array_equal(memory.priorities, expected)
    set_priorities(memory, [2], [3.0])
    assert memory.priorities[2] == (3.0 + 2e-3) ** 0.6
    play(memory, 1, start=200, end="open")  # closes slot 14, still before any draw
    assert memory.priorities[14] == INITIAL_PRIORITY
    average = memory.priorities.sum() / len(memory)
    memory.sample(4, 0.9)
    play(memory, 1, start=300, end="open")  # closes slot 15 at twice the average
    assert memory.priorities[15] == pytest.approx(2 * average)
    play(memory, 40, start=400, end="truncated")  # wraps: overwritten slots lose their priority
    assert np.all((memory.priorities > 0) == memory.ready)


def test_sampling_proportions_converge_to_priorities():
    """Draws converge to p_i / sum p over ready slots (chi-square over 200k draws)."""
    memory = make(capacity=32, alpha=0.7)
    play(memory, 20)
    slots = ready_slots(memory)
    rng = np.random.default_rng(1)
    set_priorities(memory, slots, rng.random(slots.size) * 5)
    expected = memory.priorities[slots] / memory.priorities.sum()
    draws = np.concatenate([memory.sample(16, 0.9).indices for _ in range(12_500)])  # small strata: draws must vary
    counts = np.bincount(draws, minlength=32)
    assert counts[~memory.ready].sum() == 0
    chi2 = (((counts[slots] - draws.size * expected) ** 2) / (draws.size * expected)).sum()
    assert chi2 < 60  # 19 degrees of freedom: p < 4e-6 (stratification only lowers it)


def test_alpha_zero_is_uniform_with_unit_weights():
    """prio_alpha=0 builds a uniform memory: priority updates are a no-op, draws uniform, weights 1."""
    memory = make(capacity=32, alpha=0.0)
    play(memory, 12, end="terminated")
    play(memory, 8, start=100, end="open")
    slots = ready_slots(memory)
    batch = memory.sample(64, 0.9)
    assert not memory.prioritized and memory.update_priorities(batch, torch.linspace(0, 100, 64)) == 0
    draws = np.concatenate([memory.sample(1000, 0.9).indices for _ in range(200)])
    counts = np.bincount(draws, minlength=32)[slots]
    chi2 = ((counts - draws.size / slots.size) ** 2 / (draws.size / slots.size)).sum()
    assert counts.sum() == draws.size and chi2 < 60
    np.testing.assert_array_equal(batch.weights, 1.0)


def test_importance_weights_follow_the_formula():
    """weights = (N * P(i)) ** -beta divided by the batch max: the rarest sample weighs 1."""
    memory = make(capacity=32, alpha=0.5, epsilon=0.01, beta=0.4)
    play(memory, 15)
    slots = ready_slots(memory)
    errors = np.arange(slots.size, dtype=np.float64)
    set_priorities(memory, slots, errors)
    batch = memory.sample(16, 0.99)
    p = (np.abs(errors) + 0.01) ** 0.5
    probability = dict(zip(slots, p / p.sum()))
    raw = (slots.size * np.array([probability[i] for i in batch.indices])) ** -0.4
    np.testing.assert_allclose(batch.weights, raw / raw.max(), rtol=1e-6)
    assert batch.weights.dtype == torch.float32 and batch.weights.max() == 1.0


def test_priorities_update_only_below_min_horizon():
    """A mini-race batch carries its priority mask: only samples whose clock < min_horizon change
    priority (Linesight's min_horizon_to_update_priority_actions); the clocks stay in the memory."""
    space = spaces.Dict({"observation": spaces.Box(-np.inf, np.inf, (2,), np.float32)})
    memory = make(capacity=32, alpha=1.0, epsilon=0.5, space=space,
                  mini_race=dict(clock_key="observation", clock_index=0, horizon=140, min_horizon=100))
    for t in range(10):
        memory.add({"observation": np.array([0, t], np.float32)}, 0, 1.0,
                   {"observation": np.array([0, t + 1], np.float32)}, t == 9, False)
    batch = memory.gather(np.array([0, 1, 2, 3]), 1.0, clocks=np.array([0, 99, 100, 139]))
    np.testing.assert_array_equal(batch.priority_mask, [True, True, False, False])
    assert memory.update_priorities(batch, torch.tensor([1.0, 2.0, 3.0, 4.0])) == 2
    np.testing.assert_allclose(memory.priorities[:4], [1.5, 2.5, INITIAL_PRIORITY, INITIAL_PRIORITY])


def test_growth_keeps_priorities_with_their_transitions():
    """set_capacity (grow after a wrap, and shrink) moves each priority with its transition."""
    memory = make(capacity=20, n_steps=2, alpha=1.0, epsilon=1.0)
    play(memory, 30, end="open")  # wraps the ring
    slots = ready_slots(memory)
    values = memory.states["observation"][slots, 0]
    set_priorities(memory, slots, values)  # priority = state value + 1
    for capacity in (50, 12):
        memory.set_capacity(capacity)
        slots = ready_slots(memory)
        assert memory.capacity == capacity and memory.sampler.tree.capacity == capacity
        np.testing.assert_allclose(memory.priorities[slots], memory.states["observation"][slots, 0] + 1.0)
        assert np.all((memory.priorities > 0) == memory.ready)
    play(memory, 5, start=30, end="terminated")  # keeps working after a resize
    assert np.all((memory.priorities > 0) == memory.ready)


def test_checkpoint_round_trip_with_weights_only():
    """state_dict survives torch.save / torch.load(weights_only=True) with the priorities and sampling."""
    memory = make(capacity=32, alpha=0.6)
    play(memory, 25)
    slots = ready_slots(memory)
    set_priorities(memory, slots, np.random.default_rng(2).random(slots.size))
    buffer = io.BytesIO()
    torch.save(memory.state_dict(), buffer)
    buffer.seek(0)
    restored = make(capacity=8, alpha=0.6)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    restored.rng.bit_generator.state = memory.rng.bit_generator.state
    np.testing.assert_array_equal(restored.priorities, memory.priorities)
    a, b = memory.sample(8, 0.9), restored.sample(8, 0.9)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.weights, b.weights)


def test_highest_priority_figures_file_names(tmp_path):
    """The figure writer saves state|next-state PNGs named high_error_idx_idx_nsteps_priority."""
    from PIL import Image

    space = spaces.Dict({"frame": spaces.Box(0, 255, (1, 8, 10), np.uint8)})
    memory = make(capacity=64, n_steps=3, alpha=1.0, epsilon=1e-9, space=space)
    for t in range(30):
        frame = {"frame": np.full((1, 8, 10), t, dtype=np.uint8)}
        memory.add(frame, 0, 0.0, {"frame": np.full((1, 8, 10), t + 1, dtype=np.uint8)}, t == 29, False)
    slots = ready_slots(memory)  # 0..29; slot 30 is the final state
    set_priorities(memory, slots, np.where(slots == 2, 7.0, np.where(slots == 28, 5.0, 0.0)))
    written = write_highest_priority_figures(memory, tmp_path / "high_prio_figures", top=2)
    names = sorted(p.name for p in written)
    expected = sorted(
        [f"2_{i}_3_{7.0 if i == 2 else 0.0:.2f}.png" for i in range(0, 8)]  # 2-4 < 0: skipped
        + [f"28_{i}_{min(3, 30 - i)}_{5.0 if i == 28 else 0.0:.2f}.png" for i in range(24, 30)]  # 30+: not ready
    )
    assert names == expected
    assert sorted(p.name for p in (tmp_path / "high_prio_figures").iterdir()) == expected
    image = np.asarray(Image.open(tmp_path / "high_prio_figures" / "2_5_3_0.00.png"))
    assert image.shape == (32, 80)
    assert (image[:, :40] == 5).all() and (image[:, 40:] == 8).all()  # state 5, next state 5 + 3 steps
    assert write_highest_priority_figures(make(), tmp_path / "none") == []  # no frame key: no-op
    assert not (tmp_path / "none").exists()


def test_mini_race_composition_returns_clocks_and_weights():
    """Prioritized sampler + mini-race assembler: clocks written into the states, IS weights, and a
    priority mask (clock < min_horizon) that gates the updates."""
    space = spaces.Dict({"floats": spaces.Box(-np.inf, np.inf, (2,), np.float32)})
    memory = make(capacity=64, alpha=1.0, beta=1.0, epsilon=0.5, space=space,
                  mini_race=dict(clock_key="floats", clock_index=0, horizon=10, oversample_long_term_steps=4,
                                 oversample_maximum_term_steps=1, min_horizon=6))
    for t in range(30):
        s = {"floats": np.array([0.0, t], np.float32)}
        memory.add(s, 0, 1.0, {"floats": np.array([0.0, t + 1], np.float32)}, t == 29, False)
    batch = memory.sample(256, 1.0)
    clocks = batch.states["floats"][:, 0].numpy()
    assert batch.weights.max() == 1.0 and clocks.max() <= 9
    np.testing.assert_array_equal(batch.priority_mask, clocks < 6)
    before = memory.priorities.copy()
    memory.update_priorities(batch, np.full(256, 2.5))
    changed = memory.priorities != before
    early = np.zeros(64, dtype=bool)
    early[batch.indices[clocks < 6]] = True  # a slot drawn with an early and a late clock: updated
    assert early.any() and (clocks >= 6).any()
    np.testing.assert_array_equal(changed, early)
    assert np.all(memory.priorities[changed] == 3.0)


def test_figure_writer_leaves_the_sampling_generator_alone(tmp_path):
    """Writing figures draws no random numbers (a mini-race gather would), so training is unchanged."""
    space = spaces.Dict({"frame": spaces.Box(0, 255, (1, 4, 4), np.uint8),
                         "floats": spaces.Box(-np.inf, np.inf, (1,), np.float32)})
    memory = make(capacity=32, n_steps=2, alpha=1.0, space=space,
                  mini_race=dict(clock_key="floats", horizon=8, oversample_long_term_steps=2,
                                 oversample_maximum_term_steps=1))
    for t in range(12):
        s = {"frame": np.full((1, 4, 4), t, np.uint8), "floats": np.zeros(1, np.float32)}
        memory.add(s, 0, 0.0, s, t == 11, False)
    state = memory.rng.bit_generator.state
    assert len(write_highest_priority_figures(memory, tmp_path, top=3)) > 0
    assert memory.rng.bit_generator.state == state
