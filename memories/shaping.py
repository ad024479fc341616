"""Shaping potentials read from a stored state, for potential-based shaping at batch assembly.

Ng, Harada & Russell (1999): adding ``gamma * phi(s') - phi(s)`` to a transition's return leaves
the optimal policy unchanged. The assemblers (:mod:`memories.assemblers`) add it when a batch is
assembled, as Linesight does: ``return + discount * phi(s') - phi(s)``, where ``discount`` is 0 when
the transition is terminal (the episode or the mini-race ended). Over a whole mini-race the
shaping terms then add up to ``-phi(s_0)`` with gamma 1, whatever the path.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DistancePotential:
    """``phi(s) = weight * clip(|s[key][start:stop]|, minimum, maximum)``, a (B,) float32 per batch.

    ``s[key][start:stop]`` is a vector inside a stored observation (for TrackMania: the current
    reference point in the car's frame, metres, so ``phi`` is the weighted distance to it).
    """

    key: str
    start: int
    stop: int
    weight: float
    minimum: float
    maximum: float

    def __post_init__(self) -> None:
        if self.stop <= self.start:
            raise ValueError(f"the potential's vector slice [{self.start}, {self.stop}) is empty")
        if self.maximum < self.minimum:
            raise ValueError(f"the potential's clip range [{self.minimum}, {self.maximum}] is empty")

    def __call__(self, states: dict[str, np.ndarray]) -> np.ndarray:
        """(B,) potentials of the (B, ...) states ``states``."""
        vector = states[self.key][:, self.start:self.stop].astype(np.float32, copy=False)
        distance = np.sqrt((vector * vector).sum(axis=1))
        return (self.weight * np.clip(distance, self.minimum, self.maximum)).astype(np.float32)
