"""make_replay and Replay: defaults, refusals, what a batch carries, and long heat-ups of a prioritized memory."""
import numpy as np
import pytest
import torch
from gymnasium import spaces

from memories.assemblers import MiniRaceAssembler, NStepAssembler
from memories.replay import Replay, make_replay
from memories.samplers import PrioritizedSampler, UniformSampler
from memories.storage import StepStorage

SPACE = spaces.Dict({"observation": spaces.Box(-np.inf, np.inf, (1,), np.float32)})
FLOATS = spaces.Dict({"floats": spaces.Box(-np.inf, np.inf, (2,), np.float32)})


def obs(value: float) -> dict[str, np.ndarray]:
    return {"observation": np.array([value], dtype=np.float32)}


def test_defaults_are_a_uniform_one_step_replay():
    """make_replay without options: uniform sampling, 1-step transitions, no discarding."""
    memory = make_replay(SPACE, 10)
    assert isinstance(memory.sampler, UniformSampler) and not memory.prioritized
    assert memory.assembler.n_steps == memory.storage.n_steps == 1 and not memory.assembler.discard_non_greedy
    prioritized = make_replay(SPACE, 10, prio_alpha=0.5)
    assert (prioritized.sampler.alpha, prioritized.sampler.epsilon, prioritized.sampler.beta) == (0.5, 2e-3, 1.0)
    assert prioritized.storage.track_changes and not memory.storage.track_changes
    mini = make_replay(FLOATS, 10, 2, True, mini_race=dict(horizon=8))
    assert isinstance(mini.assembler, MiniRaceAssembler) and mini.assembler.discard_non_greedy


def test_same_seed_same_batches():
    """The seed drives sampling: two memories built with one seed draw the same batches."""
    batches = []
    for _ in range(2):
        memory = make_replay(SPACE, 50, seed=4)
        for t in range(20):
            memory.add(obs(t), 0, 0.0, obs(t + 1), t == 19, False)
        batches.append(memory.sample(16, 0.9).indices)
    np.testing.assert_array_equal(*batches)


def test_assembler_and_storage_must_agree_on_n_steps():
    """A replay whose assembler and storage use different n_steps is refused, naming both."""
    with pytest.raises(ValueError, match=r"assembler's n_steps \(2\) differs from the storage's \(3\)"):
        Replay(StepStorage(SPACE, 10, 3), UniformSampler(np.random.default_rng(0)), NStepAssembler(2),
               np.random.default_rng(0))


def test_batch_carries_typed_actions_returns_discounts_and_weights():
    """TransitionBatch's contract: actions int64 (the stored ones), returns / discounts / weights float32."""
    memory = make_replay(SPACE, 20, 1, seed=0)
    for t in range(6):
        memory.add(obs(t), t % 4, 0.5, obs(t + 1), t == 5, False)
    batch = memory.gather(np.arange(6), 0.9)
    assert batch.actions.dtype == torch.int64 and batch.actions.tolist() == [0, 1, 2, 3, 0, 1]
    assert batch.returns.dtype == batch.discounts.dtype == batch.weights.dtype == torch.float32
    assert batch.weights.tolist() == [1.0] * 6
    sampled = memory.sample(4, 0.9)
    assert sampled.discounts.dtype == torch.float32 and sampled.actions.dtype == torch.int64


def test_default_steps_are_greedy_so_windows_are_not_cut():
    """Steps added without was_greedy count as greedy: discard_non_greedy_actions_in_nsteps keeps whole windows."""
    memory = make_replay(SPACE, 20, 3, discard_non_greedy_actions_in_nsteps=True)
    for t in range(5):
        memory.add(obs(t), 0, 1.0, obs(t + 1), t == 4, False)
    assert memory.gather(np.array([0]), 1.0).steps_used.tolist() == [3]


def test_long_heatup_of_a_prioritized_memory_stays_in_sync():
    """Thousands of steps without a draw: the sampler catches up on its own (the change list stays bounded)
    and every ready slot has its default priority."""
    memory = make_replay(SPACE, 6000, 1, prio_alpha=0.6)
    for t in range(5000):
        memory.add(obs(t), 0, 0.0, obs(t + 1), False, False)
    assert memory.storage.changes_pending < 4096
    assert np.count_nonzero(memory.priorities) == len(memory) == 4999


def test_torch_errors_update_priorities_through_the_replay():
    """update_priorities takes the agent's (B,) torch errors, with gradients, float32."""
    memory = make_replay(SPACE, 20, 1, prio_alpha=1.0, prio_epsilon=1e-9)
    for t in range(4):
        memory.add(obs(t), 0, 0.0, obs(t + 1), t == 3, False)
    batch = memory.gather(np.arange(4), 0.9)
    errors = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True) * 1.0
    assert memory.update_priorities(batch, errors) == 4
    np.testing.assert_allclose(memory.priorities[:4], [1.0, 2.0, 3.0, 4.0], rtol=1e-6)
