import numpy as np
import pytest
from gymnasium import spaces

from memories.replay import Replay, make_replay

SPACE = spaces.Dict({"observation": spaces.Box(-np.inf, np.inf, (1,), np.float32)})


def obs(value: float) -> dict[str, np.ndarray]:
    return {"observation": np.array([value], dtype=np.float32)}


def play(memory: Replay, rewards: list[float], start: float, end: str, greedy=None) -> None:
    """An episode whose states are start, start+1, ...; it ends as 'terminated', 'truncated' or 'open'."""
    for t, r in enumerate(rewards):
        last = t == len(rewards) - 1
        memory.add(obs(start + t), t, r, obs(start + t + 1), last and end == "terminated",
                   last and end == "truncated", True if greedy is None else greedy[t])


def transitions(memory: Replay, gamma: float) -> dict[float, tuple]:
    ready = np.flatnonzero(memory.ready[: memory.num_slots_used])
    batch = memory.gather(ready, gamma)
    return {float(s): (float(r), float(d), float(n), int(k)) for s, r, d, n, k in zip(
        batch.states["observation"][:, 0].numpy(), batch.returns.numpy(), batch.discounts.numpy(),
        batch.next_states["observation"][:, 0].numpy(), batch.steps_used)}


def test_n_step_returns_stop_at_termination():
    """A terminated episode: returns sum the rewards left, discount 0 (no bootstrap)."""
    memory = make_replay(SPACE, 100, n_steps=3)
    play(memory, [1.0, 2.0, 4.0, 8.0], start=0, end="terminated")
    t = transitions(memory, gamma=0.5)
    assert t[0.0] == (1 + 0.5 * 2 + 0.25 * 4, 0.125, 3.0, 3)
    assert t[1.0] == (2 + 0.5 * 4 + 0.25 * 8, 0.0, 4.0, 3)
    assert t[2.0] == (4 + 0.5 * 8, 0.0, 4.0, 2)
    assert t[3.0] == (8.0, 0.0, 4.0, 1)


def test_truncation_bootstraps_from_final_state():
    """A truncated episode bootstraps from its stored final state with gamma ** k."""
    memory = make_replay(SPACE, 100, n_steps=3)
    play(memory, [1.0, 1.0], start=10, end="truncated")
    t = transitions(memory, gamma=0.5)
    assert t[10.0] == (1.5, 0.25, 12.0, 2)
    assert t[11.0] == (1.0, 0.5, 12.0, 1)


def test_windows_never_cross_into_the_next_episode():
    """n-step windows stop at the episode end even when the next episode follows in the ring."""
    memory = make_replay(SPACE, 100, n_steps=3)
    play(memory, [1.0, 1.0], start=0, end="terminated")
    play(memory, [5.0, 5.0, 5.0, 5.0], start=100, end="open")
    t = transitions(memory, gamma=1.0)
    assert t[1.0] == (1.0, 0.0, 2.0, 1)
    assert t[100.0] == (15.0, 1.0, 103.0, 3)
    assert 101.0 not in t  # its window is still open


def test_non_greedy_actions_cut_the_window():
    """discard_non_greedy_actions_in_nsteps cuts before the first exploratory action after the first."""
    memory = make_replay(SPACE, 100, n_steps=3, discard_non_greedy_actions_in_nsteps=True)
    play(memory, [1.0, 1.0, 1.0, 1.0, 1.0], start=0, end="terminated", greedy=[False, True, False, True, True])
    t = transitions(memory, gamma=1.0)
    assert t[0.0] == (2.0, 1.0, 2.0, 2)  # first action may be exploratory; cut before action 2
    assert t[1.0] == (1.0, 1.0, 2.0, 1)


def test_growing_capacity_keeps_data_and_order():
    """set_capacity (memory_size_schedule) keeps every stored transition and its n-step meaning."""
    memory = make_replay(SPACE, 20, n_steps=2)
    play(memory, [1.0] * 30, start=0, end="open")  # wraps the ring
    before = transitions(memory, gamma=0.9)
    memory.set_capacity(50)
    assert transitions(memory, gamma=0.9) == before
    play(memory, [1.0] * 5, start=30, end="terminated")
    after = transitions(memory, gamma=0.9)
    assert set(before) <= set(after) and 34.0 in after


def test_uniform_sampling_only_returns_ready_slots():
    memory = make_replay(SPACE, 64, n_steps=3, seed=0)
    play(memory, [0.0] * 10, start=0, end="open")
    indices = memory.sample(1000, 0.9).indices
    assert memory.ready[indices].all()
    assert len(set(indices.tolist())) == len(memory)


def test_checkpoint_round_trip():
    memory = make_replay(SPACE, 32, n_steps=2)
    play(memory, [1.0, 2.0, 3.0], start=0, end="truncated")
    clone = make_replay(SPACE, 8, n_steps=2)
    clone.load_state_dict(memory.state_dict())
    assert transitions(clone, 0.9) == transitions(memory, 0.9)


def test_capacity_must_hold_a_window():
    with pytest.raises(ValueError, match="must exceed"):
        make_replay(SPACE, 3, n_steps=3)
