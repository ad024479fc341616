"""StepStorage on its own: refusals, counters, the slots it says it holds, resizing and checkpoints."""
from collections import deque

import numpy as np
import pytest
from gymnasium import spaces

from memories.storage import StepStorage

SPACE = spaces.Dict({"observation": spaces.Box(-np.inf, np.inf, (1,), np.float32)})


def obs(value: float) -> dict[str, np.ndarray]:
    return {"observation": np.array([value], dtype=np.float32)}


def add_steps(storage: StepStorage, count: int, start: int = 0, end: bool = False) -> None:
    for t in range(start, start + count):
        last = end and t == start + count - 1
        storage.add(obs(t), t % 3, 1.0, obs(t + 1), last, False)


def test_refusals_name_the_limits():
    """n_steps >= 1 and capacity > n_steps + 1; the smallest accepted values are accepted."""
    with pytest.raises(ValueError, match="n_steps must be at least 1, got 0"):
        StepStorage(SPACE, 10, 0)
    with pytest.raises(ValueError, match=r"memory capacity 4 must exceed n_steps \+ 1 = 4"):
        StepStorage(SPACE, 4, 3)
    assert StepStorage(SPACE, 5, 3).capacity == 5
    assert StepStorage(SPACE, 3).n_steps == 1  # default n_steps 1: capacity 3 > 2


def test_counters_and_slots_held():
    """A new storage holds nothing; each step counts one transition; a finished episode also holds its
    final state, so size = steps + episodes; nothing is tracked unless asked."""
    storage = StepStorage(SPACE, 20, 2)
    assert (storage.size, storage.transitions_added, len(storage), storage.cursor) == (0, 0, 0, 0)
    add_steps(storage, 3, end=True)
    assert (storage.size, storage.transitions_added, len(storage), storage.cursor) == (4, 3, 3, 4)
    add_steps(storage, 4, start=10)
    assert (storage.size, storage.transitions_added, len(storage)) == (8, 7, 5)  # 2 windows still open
    assert storage.changes_pending == 0 and storage.pop_changed().size == 0


def test_default_step_is_greedy():
    """A step stored without was_greedy counts as greedy."""
    storage = StepStorage(SPACE, 10, 1)
    storage.add(obs(0), 0, 0.0, obs(1), False, False)
    assert storage.greedy[0]


def test_nbytes_counts_every_array():
    """nbytes = states + actions (8 B) + rewards (4 B) + four flags (1 B each) per slot."""
    storage = StepStorage(SPACE, 10, 1)
    assert storage.nbytes() == 10 * (4 + 8 + 4 + 4)


def test_growing_a_wrapped_ring_keeps_the_newest_in_order():
    """set_capacity on a wrapped ring returns the old slots oldest first and keeps the open windows."""
    storage = StepStorage(SPACE, 8, 2)
    add_steps(storage, 11)  # slots 0..7 then 0..2 again: cursor 3
    keep = storage.set_capacity(12)
    np.testing.assert_array_equal(keep, [3, 4, 5, 6, 7, 0, 1, 2])
    np.testing.assert_array_equal(storage.states["observation"][:8, 0], np.arange(3, 11))
    assert list(storage.pending) == [6, 7] and storage.cursor == 8 and storage.size == 8


def test_shrinking_keeps_the_newest_slots():
    """Shrinking below the slots held drops the oldest; keeping exactly the slots held drops nothing."""
    storage = StepStorage(SPACE, 10, 1)
    add_steps(storage, 6)
    keep = storage.set_capacity(6)
    np.testing.assert_array_equal(keep, np.arange(6))
    keep = storage.set_capacity(4)
    np.testing.assert_array_equal(keep, [2, 3, 4, 5])
    np.testing.assert_array_equal(storage.states["observation"][:, 0], [2, 3, 4, 5])
    assert list(storage.pending) == [3] and storage.size == 4 and storage.cursor == 0


def test_checkpoint_restores_cursor_pending_and_counters():
    """load_state_dict restores where the next step goes, the open windows and the transition count."""
    storage = StepStorage(SPACE, 10, 2)
    add_steps(storage, 5)
    clone = StepStorage(SPACE, 4, 2)
    clone.load_state_dict(storage.state_dict())
    assert (clone.cursor, clone.transitions_added, clone.pending) == (5, 5, deque([3, 4]))
    add_steps(storage, 1, start=5)
    add_steps(clone, 1, start=5)
    np.testing.assert_array_equal(clone.ready, storage.ready)
