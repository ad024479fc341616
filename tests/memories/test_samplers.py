"""The samplers on their own: refusals, edge cases of stratified sampling, importance weights, checkpoints."""
import numpy as np
import pytest
import torch
from gymnasium import spaces

from memories.replay import make_replay
from memories.samplers import INITIAL_PRIORITY

SPACE = spaces.Dict({"observation": spaces.Box(-np.inf, np.inf, (1,), np.float32)})


def memory_with(episode_lengths, alpha=1.0, capacity=64, n_steps=1, beta=1.0):
    memory = make_replay(SPACE, capacity, n_steps, seed=0, prio_alpha=alpha, prio_epsilon=1e-9, prio_beta=beta)
    for length in episode_lengths:
        for t in range(length):
            memory.add({"observation": np.array([t], np.float32)}, 0, 1.0, {"observation": np.array([t + 1], np.float32)},
                       t == length - 1, False)
    return memory


@pytest.mark.parametrize("alpha", [0.0, 1.0], ids=["uniform", "prioritized"])
def test_empty_memory_is_refused_and_one_transition_is_enough(alpha):
    """Sampling a memory with no complete transition names the problem; a single one can fill a batch."""
    empty = memory_with([], alpha=alpha)
    with pytest.raises(ValueError, match="cannot sample from a memory with no complete transition"):
        empty.sample(4, 0.9)
    one = memory_with([1], alpha=alpha)  # slot 0 ready, slot 1 its final state
    assert one.sample(5, 0.9).indices.tolist() == [0] * 5
    assert one.sample(1, 0.9).indices.tolist() == [0]


def test_prioritized_strata_have_independent_offsets():
    """Stratified sampling draws one independent point per segment: with leaves 0.5, 1, 0.5 and 2 segments,
    the pairs (first, last) and (middle, middle) occur (a shared offset could only give (first, middle) or
    (middle, last))."""
    memory = memory_with([3], n_steps=1)
    memory.sampler.update(memory.storage, np.array([0, 1, 2]), np.array([0.5, 1.0, 0.5]))
    pairs = {tuple(memory.sample(2, 0.9).indices.tolist()) for _ in range(200)}
    assert (0, 2) in pairs and (1, 1) in pairs


def test_importance_weights_are_normalised_and_zero_for_unsampleable_slots():
    """Weights are divided by their batch maximum even when all lie below 1; a slot of priority 0 gets
    weight 0, and a batch of only such slots gets weights 1 (never NaN)."""
    memory = memory_with([4], n_steps=1, beta=1.0)
    sampler = memory.sampler
    sampler.update(memory.storage, np.arange(4), np.array([1.0, 2.0, 3.0, 6.0]))  # P = 1/12 .. 6/12, N = 4
    high = sampler.importance_weights(np.array([2, 3]), 4)  # (N P)^-1 = 1, 0.5 -> divided by 1
    np.testing.assert_allclose(high, [1.0, 0.5], rtol=1e-6)
    assert high.dtype == np.float32
    below = sampler.importance_weights(np.array([3, 2]), 8)  # (8 P)^-1 = 0.25, 0.5: all below 1, max 0.5
    np.testing.assert_allclose(below, [0.5, 1.0], rtol=1e-6)
    np.testing.assert_array_equal(sampler.importance_weights(np.array([4, 0]), 4), [0.0, 1.0])  # slot 4: final state
    np.testing.assert_array_equal(sampler.importance_weights(np.array([4, 4]), 4), [1.0, 1.0])


def test_update_takes_torch_errors_with_gradients():
    """Errors may come as a torch tensor that still requires grad (float32): they are detached and used."""
    memory = memory_with([3])
    errors = torch.tensor([1.0, 2.0, 3.0], requires_grad=True) * 1.0
    assert memory.sampler.update(memory.storage, np.arange(3), errors) == 3
    np.testing.assert_allclose(memory.priorities[:3], [1.0, 2.0, 3.0], rtol=1e-6)


def test_checkpoint_keeps_the_average_priority_for_new_slots():
    """After a restore, a slot that becomes ready gets twice the average priority of the last draw, as it
    would have without the restart."""
    memory = memory_with([10])
    memory.sampler.update(memory.storage, np.arange(10), np.arange(10) + 1.0)
    memory.sample(4, 0.9)
    average = memory.sampler.average_priority
    restored = memory_with([])
    restored.load_state_dict(memory.state_dict())
    for r in (memory, restored):
        r.add({"observation": np.zeros(1, np.float32)}, 0, 0.0, {"observation": np.zeros(1, np.float32)}, True, False)
    assert restored.priorities[11] == memory.priorities[11] == pytest.approx(2 * average)


def test_uniform_checkpoint_restored_into_a_prioritized_memory():
    """A checkpoint of a uniform memory gives every ready slot the default priority (0.4 before any draw)."""
    uniform = memory_with([5], alpha=0.0)
    prioritized = memory_with([], alpha=1.0)
    prioritized.load_state_dict(uniform.state_dict())
    expected = np.zeros(64)
    expected[:5] = INITIAL_PRIORITY
    np.testing.assert_array_equal(prioritized.priorities, expected)
