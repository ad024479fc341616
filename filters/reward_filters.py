"""Reward filters: scaling and clipping."""
from __future__ import annotations

from filters.filter import RewardFilter


class RewardRescaleFilter(RewardFilter):
    def __init__(self, scale: float) -> None:
        self.scale = scale

    def filter(self, reward: float) -> float:
        return reward * self.scale


class RewardClippingFilter(RewardFilter):
    def __init__(self, low: float, high: float) -> None:
        if low > high:
            raise ValueError(f"reward clipping needs low <= high, got {low} > {high}")
        self.low, self.high = low, high

    def filter(self, reward: float) -> float:
        return min(max(reward, self.low), self.high)
