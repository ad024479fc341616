import numpy as np
import pytest

from exploration_policies import EpsilonBoltzmann, EpsilonGreedy, Greedy
from rulka.core_types import RunPhase
from rulka.schedules import Schedule

N = 200_000
A = 4


def q_rows() -> np.ndarray:
    q = np.zeros((N, A))
    q[:, 2] = 1.0  # action 2 is greedy
    return q


def non_greedy_fraction(policy, phase=RunPhase.TRAIN) -> float:
    actions, was_greedy = policy.select(q_rows(), 0, phase)
    assert np.array_equal(was_greedy, actions == 2)
    return float((actions != 2).mean())


def test_epsilon_greedy_frequency():
    """epsilon = 0.3: a random action 30 % of the time, so a non-greedy one 0.3 x 3/4."""
    policy = EpsilonGreedy(A, Schedule([(0, 0.3)], "staircase"), seed=0)
    assert non_greedy_fraction(policy) == pytest.approx(0.3 * 3 / 4, abs=0.005)
    assert non_greedy_fraction(policy, RunPhase.EVALUATE) == 0.0


def test_epsilon_boltzmann_mixing_frequencies():
    """Random with p=eps, Boltzmann with p=(1-eps) x eps_b, greedy otherwise (the configuration guide's mix)."""
    eps, eps_b = 0.1, 0.4
    # tau huge: a Boltzmann action is (almost) uniform over actions
    wide = EpsilonBoltzmann(A, Schedule([(0, eps)], "staircase"), Schedule([(0, eps_b)], "staircase"), 1e6, seed=1)
    expected = eps * 3 / 4 + (1 - eps) * eps_b * 3 / 4
    assert non_greedy_fraction(wide) == pytest.approx(expected, abs=0.005)
    # tau tiny: the noise never overturns a gap of 1, so only epsilon explores
    narrow = EpsilonBoltzmann(A, Schedule([(0, eps)], "staircase"), Schedule([(0, eps_b)], "staircase"), 1e-6, seed=1)
    assert non_greedy_fraction(narrow) == pytest.approx(eps * 3 / 4, abs=0.005)


def test_heatup_is_fully_random_and_greedy_is_argmax():
    policy = EpsilonGreedy(A, Schedule([(0, 0.0)], "staircase"), seed=0)
    assert non_greedy_fraction(policy, RunPhase.HEATUP) == pytest.approx(3 / 4, abs=0.005)
    actions, was_greedy = Greedy(A).select(q_rows()[:10], 0, RunPhase.TRAIN)
    assert (actions == 2).all() and was_greedy.all()


def distinct_greedy_rows(n: int = 1000) -> np.ndarray:
    """(n, A) Q-values whose greedy action cycles through 0..A-1 from row to row."""
    q = np.zeros((n, A))
    q[np.arange(n), np.arange(n) % A] = 1.0
    return q


@pytest.mark.parametrize("make", [
    lambda: Greedy(A),
    lambda: EpsilonGreedy(A, Schedule([(0, 0.0)], "staircase"), seed=0),
    lambda: EpsilonBoltzmann(A, Schedule([(0, 0.0)], "staircase"), Schedule([(0, 0.0)], "staircase"), 1.0, seed=0),
], ids=["greedy", "epsilon_greedy", "epsilon_boltzmann"])
def test_greedy_action_is_taken_per_environment(make):
    """Without exploration each environment gets the argmax of its own row of Q, flagged greedy as a boolean mask."""
    q = distinct_greedy_rows()
    actions, was_greedy = make().select(q, 0, RunPhase.TRAIN)
    np.testing.assert_array_equal(actions, np.arange(len(q)) % A)
    assert was_greedy.dtype == np.bool_ and was_greedy.all()


@pytest.mark.parametrize("make", [
    lambda seed: EpsilonGreedy(A, Schedule([(0, 0.5)], "staircase"), seed=seed),
    lambda seed: EpsilonBoltzmann(A, Schedule([(0, 0.3)], "staircase"), Schedule([(0, 0.5)], "staircase"), 1.0,
                                  seed=seed),
], ids=["epsilon_greedy", "epsilon_boltzmann"])
def test_seed_makes_exploration_reproducible(make):
    """The same seed gives the same actions (exact resume depends on it); another seed gives others."""
    q = distinct_greedy_rows()
    first, again, other = (make(seed).select(q, 0, RunPhase.TRAIN)[0] for seed in (7, 7, 8))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_epsilon_boltzmann_noise_is_gaussian_with_scale_tau():
    """Boltzmann branch only: argmax(Q + tau N(0,1)) overturns a gap of 1 between 2 actions with
    probability P(N(0, 2 tau^2) > 1) = 0.2398 at tau = 1 (a wrong noise law or scale gives another figure)."""
    q = np.zeros((N, 2))
    q[:, 0] = 1.0
    policy = EpsilonBoltzmann(2, Schedule([(0, 0.0)], "staircase"), Schedule([(0, 1.0)], "staircase"), 1.0, seed=3)
    actions, was_greedy = policy.select(q, 0, RunPhase.TRAIN)
    assert float((actions == 1).mean()) == pytest.approx(0.2398, abs=0.005)
    np.testing.assert_array_equal(was_greedy, actions == 0)


def test_epsilon_boltzmann_phases():
    """Heatup: uniformly random. Evaluation: no Boltzmann noise, only ``evaluation_epsilon`` (default 0, greedy)."""
    eps_b_always = Schedule([(0, 1.0)], "staircase")
    no_eps = Schedule([(0, 0.0)], "staircase")
    default = EpsilonBoltzmann(A, no_eps, eps_b_always, 1e6, seed=2)
    assert non_greedy_fraction(default, RunPhase.HEATUP) == pytest.approx(3 / 4, abs=0.005)
    assert non_greedy_fraction(default, RunPhase.EVALUATE) == 0.0
    half = EpsilonBoltzmann(A, no_eps, eps_b_always, 1e6, evaluation_epsilon=0.5, seed=2)
    assert non_greedy_fraction(half, RunPhase.EVALUATE) == pytest.approx(0.5 * 3 / 4, abs=0.005)


def test_current_values_report_the_schedules_at_the_step():
    """The logged exploration values are the schedules' values at the given step, under stable names."""
    eps = Schedule([(0, 1.0), (100, 0.0)], "linear")
    eps_b = Schedule([(0, 0.5), (100, 0.1)], "linear")
    assert EpsilonGreedy(A, eps).current_values(50) == {"epsilon": pytest.approx(0.5)}
    assert EpsilonBoltzmann(A, eps, eps_b, 1.0).current_values(50) == {"epsilon": pytest.approx(0.5),
                                                                      "epsilon_boltzmann": pytest.approx(0.3)}
