import numpy as np
import pytest
from gymnasium import spaces

from memories.mini_race_replay import MiniRaceReplay

SPACE = spaces.Dict({
    "frame": spaces.Box(0, 255, (1, 4, 5), np.uint8),
    "floats": spaces.Box(-np.inf, np.inf, (3,), np.float32),
})


def memory(n_steps: int = 3, **kwargs) -> MiniRaceReplay:
    return MiniRaceReplay(SPACE, 1000, n_steps, False, seed=0, clock_key="floats", clock_index=0, **kwargs)


def fill(m: MiniRaceReplay, rewards: list[float], finish: bool) -> None:
    for t, r in enumerate(rewards):
        s = {"frame": np.full((1, 4, 5), t, np.uint8), "floats": np.array([-1.0, t, 0.0], np.float32)}
        nxt = {"frame": np.full((1, 4, 5), t + 1, np.uint8), "floats": np.array([-1.0, t + 1, 0.0], np.float32)}
        m.add(s, t % 12, r, nxt, finish and t == len(rewards) - 1, False)


def test_clock_distribution_oversamples_small_clocks():
    """Draw in [-35, 145), |t| - 5, clip 0: P(0) = 11/180, P(1..30) = 2/180, P(31..139) = 1/180,
    so the clocks 1..35 are about twice as likely as 40..139."""
    clocks = memory().sample_clocks(1_800_000)
    freq = np.bincount(clocks, minlength=140) / len(clocks)
    assert clocks.min() == 0 and clocks.max() == 139
    assert freq[0] == pytest.approx(11 / 180, rel=0.03)
    np.testing.assert_allclose(freq[1:31], 2 / 180, rtol=0.06)
    np.testing.assert_allclose(freq[31:140], 1 / 180, rtol=0.08)
    assert freq[1:36].mean() / freq[40:140].mean() == pytest.approx(1.86, abs=0.05)


def test_n_step_window_is_cut_at_the_mini_race_end():
    """n' = min(n, 140 - t); the transition is terminal when t + n' reaches 140; clocks are written."""
    m = memory()
    fill(m, [1.0] * 20, finish=False)
    idx = np.array([0, 0, 0, 0])
    batch = m.gather(idx, gamma=0.5, clocks=np.array([136, 137, 138, 139]))
    np.testing.assert_array_equal(batch.steps_used, [3, 3, 2, 1])
    np.testing.assert_allclose(batch.discounts, [0.125, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(batch.returns, [1.75, 1.75, 1.5, 1.0])
    np.testing.assert_array_equal(batch.states["floats"][:, 0], [136, 137, 138, 139])
    np.testing.assert_array_equal(batch.next_states["floats"][:, 0], [139, 140, 140, 140])
    np.testing.assert_array_equal(batch.next_states["frame"][:, 0, 0, 0], [3, 3, 2, 1])
    assert m.states["floats"][0, 0] == -1.0  # the stored state is untouched


def test_finish_inside_the_window_is_terminal_with_rewards_summed():
    m = memory()
    fill(m, [1.0, 2.0, 4.0], finish=True)
    batch = m.gather(np.array([1, 0]), gamma=1.0, clocks=np.array([0, 0]))
    np.testing.assert_array_equal(batch.steps_used, [2, 3])
    np.testing.assert_allclose(batch.returns, [6.0, 7.0])
    np.testing.assert_allclose(batch.discounts, [0.0, 0.0])


def test_frames_are_stored_once_per_step():
    """The next state is the following slot: a 120 x 160 transition costs about one frame, not two."""
    space = spaces.Dict({"frame": spaces.Box(0, 255, (1, 120, 160), np.uint8),
                         "floats": spaces.Box(-np.inf, np.inf, (184,), np.float32)})
    m = MiniRaceReplay(space, 1000, 3, True, seed=0)
    assert m.bytes_per_transition() / (2 * 120 * 160) <= 0.55
