"""Reward scaling and clipping."""
import pytest

from filters.reward_filters import RewardClippingFilter, RewardRescaleFilter


def test_clipping_bounds_and_refusal():
    """Rewards are clipped to [low, high]; low == high is allowed (a constant reward); low > high is refused."""
    f = RewardClippingFilter(-1.0, 2.0)
    assert (f.filter(-5.0), f.filter(0.5), f.filter(9.0)) == (-1.0, 0.5, 2.0)
    assert RewardClippingFilter(1.0, 1.0).filter(7.0) == 1.0
    with pytest.raises(ValueError, match="low <= high, got 2 > 1"):
        RewardClippingFilter(2, 1)


def test_rescale():
    """The reward is multiplied by the scale."""
    assert RewardRescaleFilter(0.25).filter(-8.0) == -2.0
