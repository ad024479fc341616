import numpy as np
import pytest
from gymnasium import spaces

from memories.replay import Replay, make_replay

SPACE = spaces.Dict({
    "frame": spaces.Box(0, 255, (1, 4, 5), np.uint8),
    "floats": spaces.Box(-np.inf, np.inf, (3,), np.float32),
})


def memory(n_steps: int = 3, potential=None, **kwargs) -> Replay:
    return make_replay(SPACE, 1000, n_steps, False, seed=0, potential=potential,
                       mini_race=dict(clock_key="floats", clock_index=0, **kwargs))


def fill(m: Replay, rewards: list[float], finish: bool) -> None:
    for t, r in enumerate(rewards):
        s = {"frame": np.full((1, 4, 5), t, np.uint8), "floats": np.array([-1.0, t, 0.0], np.float32)}
        nxt = {"frame": np.full((1, 4, 5), t + 1, np.uint8), "floats": np.array([-1.0, t + 1, 0.0], np.float32)}
        m.add(s, t % 12, r, nxt, finish and t == len(rewards) - 1, False)


def test_clock_distribution_oversamples_small_clocks():
    """Draw in [-35, 145), |t| - 5, clip 0: P(0) = 11/180, P(1..30) = 2/180, P(31..139) = 1/180,
    so the clocks 1..35 are about twice as likely as 40..139."""
    m = memory()
    clocks = m.assembler.sample_clocks(m.rng, 1_800_000)
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
    m = make_replay(space, 1000, 3, True, seed=0, mini_race={})
    assert m.bytes_per_transition() / (2 * 120 * 160) <= 0.55


SHAPED_SPACE = spaces.Dict({"floats": spaces.Box(-np.inf, np.inf, (4,), np.float32)})


def _shaped_episode(m: Replay, distances: list[float], rewards: list[float], finish: bool) -> None:
    """floats = [clock, d, 0, 0]: the potential's vector (floats[1:4]) has norm d."""
    for t, r in enumerate(rewards):
        s = {"floats": np.array([0.0, distances[t], 0.0, 0.0], np.float32)}
        nxt = {"floats": np.array([0.0, distances[t + 1], 0.0, 0.0], np.float32)}
        m.add(s, 0, r, nxt, finish and t == len(rewards) - 1, False)


def test_shaped_returns_of_a_mini_race_add_up_to_minus_phi_of_its_start():
    """Shaping at batch assembly: chaining the transitions of one 10-action mini-race (n = 3, gamma 1:
    clocks 0, 3, 6, 9), the shaped returns add up to the raw rewards - phi(s_0), whatever the
    potentials along the way; the env-side shaping (phi(s') - phi(s) in each reward, the mini-race end
    terminal) would add up to phi(s_10) - phi(s_0) instead."""
    from memories.shaping import DistancePotential

    potential = DistancePotential("floats", 1, 4, -0.1, 2.0, 25.0)
    m = make_replay(SHAPED_SPACE, 100, 3, False, seed=0, potential=potential,
                    mini_race=dict(clock_key="floats", clock_index=0, horizon=10))
    rng = np.random.default_rng(0)
    distances = list(rng.uniform(0.0, 40.0, 31))  # includes values clipped at 2 and 25
    rewards = list(rng.normal(size=30))
    _shaped_episode(m, distances, rewards, finish=False)
    start, clock, total, raw = 5, 0, 0.0, 0.0
    while True:
        batch = m.gather(np.array([start]), 1.0, clocks=np.array([clock]))
        k = int(batch.steps_used[0])
        total += float(batch.returns[0])
        raw += sum(rewards[start:start + k])
        if float(batch.discounts[0]) == 0.0:
            break
        start, clock = start + k, clock + k
    assert clock + k == 10
    phi = lambda d: -0.1 * min(max(d, 2.0), 25.0)  # noqa: E731
    assert total == pytest.approx(raw - phi(distances[5]), abs=1e-5)
    assert abs(phi(distances[15]) - phi(distances[5])) > 0.1  # the env-side sum would differ


def test_n_step_shaping_drops_the_next_potential_only_at_a_termination():
    """Plain n-step replay: returns + gamma**k * phi(s') - phi(s); phi(s') is dropped when the
    episode terminated inside the window, kept (discounted) through a truncation."""
    from memories.shaping import DistancePotential

    potential = DistancePotential("floats", 1, 4, -0.1, 2.0, 25.0)
    for finish in (True, False):
        m = make_replay(SHAPED_SPACE, 100, 3, False, seed=0, potential=potential)
        distances = [10.0, 12.0, 14.0, 16.0, 18.0]
        _shaped_episode(m, distances, [1.0, 1.0, 1.0, 1.0], finish=finish)
        if not finish:
            m.add({"floats": np.array([0, 18.0, 0, 0], np.float32)}, 0, 1.0,
                  {"floats": np.array([0, 20.0, 0, 0], np.float32)}, False, True)
        batch = m.gather(np.array([0, 2]), 0.5)
        returns = batch.returns.numpy()
        assert returns[0] == pytest.approx(1 + 0.5 + 0.25 + 0.125 * (-1.6) - (-1.0))
        last = (1 + 0.5) - (-1.4) if finish else (1 + 0.5 + 0.25) + 0.125 * (-2.0) - (-1.4)
        assert returns[1] == pytest.approx(last)
