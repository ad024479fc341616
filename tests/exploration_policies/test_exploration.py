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
